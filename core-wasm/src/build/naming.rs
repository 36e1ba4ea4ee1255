//! How ops are named: the normalized op type and the label formats.

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
    if boundary {
        format!("{op_type}_{type_index}")
    } else {
        format!("{op_type}_{type_index}_{step_index}")
    }
}

/// The op type a label starts with (`conv2d` for `conv2d_3_5:2`): every layer label begins with
/// its type, which has no underscores. A text without `_` is a type alone.
pub fn label_op_type(label: &str) -> &str {
    label.split_once('_').map_or(label, |(op_type, _)| op_type)
}

/// An op label: the layer label, plus `:{pass}` when the layer ran more than once.
pub fn op_label(layer_label: &str, pass: u32, num_passes: usize) -> String {
    if num_passes > 1 {
        format!("{layer_label}:{pass}")
    } else {
        layer_label.to_string()
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
        assert_eq!(op_label("relu_1_3", 2, 5), "relu_1_3:2");
        assert_eq!(op_label("relu_1_3", 1, 1), "relu_1_3");
        assert_eq!(label_op_type("conv2d_3_5:2"), "conv2d");
        assert_eq!(label_op_type("input_1"), "input");
        assert_eq!(label_op_type("relu"), "relu");
    }
}
