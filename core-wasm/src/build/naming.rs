//! How ops are named: the normalized op type and the label formats.

use std::sync::Arc;

/// Binary operators whose reflected (`__radd__`) and in-place (`__iadd__`) dunders fold onto the
/// plain name, so `"add"` matches `a + b`, `1 + a` and `a += b` alike.
const FOLDED_OPERATORS: [&str; 14] = [
    "add", "sub", "mul", "truediv", "floordiv", "div", "mod", "pow", "matmul", "and", "or", "xor",
    "lshift", "rshift",
];

/// The normalized type of a function name: lower-cased, underscores removed, and reflected or
/// in-place operator dunders folded onto the operator (`__radd__` → `add`, `add_` → `add`).
pub fn op_type(func_name: &str) -> String {
    let is_dunder = func_name.starts_with("__") && func_name.ends_with("__") && func_name.len() > 4;
    let compact: String = func_name
        .chars()
        .filter(|character| *character != '_')
        .flat_map(char::to_lowercase)
        .collect();
    if is_dunder {
        for prefix in ["r", "i"] {
            if let Some(rest) = compact.strip_prefix(prefix) {
                if FOLDED_OPERATORS.contains(&rest) {
                    return rest.to_string();
                }
            }
        }
    }
    if compact.is_empty() {
        "op".to_string()
    } else {
        compact
    }
}

/// A layer label: `{type}_{typeIndex}_{stepIndex}` for computing ops, `{type}_{typeIndex}` for
/// inputs, outputs, buffers and constants.
pub fn layer_label(op_type: &str, type_index: u32, step_index: u32, boundary: bool) -> String {
    // Built by hand: one label per layer is made while a capture is ingested, and `format!`
    // costs several times the allocation it needs.
    let mut label = String::with_capacity(op_type.len() + 22);
    label.push_str(op_type);
    label.push('_');
    push_decimal(&mut label, type_index);
    if !boundary {
        label.push('_');
        push_decimal(&mut label, step_index);
    }
    label
}

/// Appends `number` in decimal.
fn push_decimal(text: &mut String, number: u32) {
    let mut digits = [0u8; 10];
    let mut start = digits.len();
    let mut rest = number;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for &digit in &digits[start..] {
        text.push(char::from(digit));
    }
}

/// The op type a label starts with (`conv2d` for `conv2d_3_5:2`): every layer label begins with
/// its type, which has no underscores. A text without `_` is a type alone.
pub fn label_op_type(label: &str) -> &str {
    label.split_once('_').map_or(label, |(op_type, _)| op_type)
}

/// An op label: the layer label, plus `:{pass}` when the layer ran more than once. The op of a
/// layer that ran once shares the layer's label (no copy: most layers of a long trace run once).
pub fn op_label(layer_label: &Arc<str>, pass: u32, num_passes: usize) -> Arc<str> {
    if num_passes > 1 {
        let mut label = String::with_capacity(layer_label.len() + 11);
        label.push_str(layer_label);
        label.push(':');
        push_decimal(&mut label, pass);
        label.into()
    } else {
        Arc::clone(layer_label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_function_names() {
        assert_eq!(op_type("relu"), "relu");
        assert_eq!(op_type("__radd__"), "add");
        assert_eq!(op_type("__iadd__"), "add");
        assert_eq!(op_type("__add__"), "add");
        assert_eq!(op_type("add_"), "add");
        assert_eq!(op_type("layer_norm"), "layernorm");
        assert_eq!(op_type("Conv2D"), "conv2d");
        assert_eq!(op_type("__rmatmul__"), "matmul");
        assert_eq!(op_type("__round__"), "round");
        assert_eq!(op_type("__getitem__"), "getitem");
        assert_eq!(op_type("___"), "op");
    }

    #[test]
    fn formats_labels() {
        assert_eq!(layer_label("relu", 1, 3, false), "relu_1_3");
        assert_eq!(layer_label("input", 2, 9, true), "input_2");
        assert_eq!(&*op_label(&"relu_1_3".into(), 2, 5), "relu_1_3:2");
        let layer: Arc<str> = "relu_1_3".into();
        assert!(Arc::ptr_eq(&op_label(&layer, 1, 1), &layer));
        assert_eq!(layer_label("add", 10, 0, false), "add_10_0");
        assert_eq!(
            layer_label("add", 4_294_967_295, 1_000_000, false),
            "add_4294967295_1000000"
        );
        assert_eq!(
            &*op_label(&"add_1_2".into(), 4_294_967_295, 2),
            "add_1_2:4294967295"
        );
        assert_eq!(label_op_type("conv2d_3_5:2"), "conv2d");
        assert_eq!(label_op_type("input_1"), "input");
        assert_eq!(label_op_type("relu"), "relu");
    }
}
