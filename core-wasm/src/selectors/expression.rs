//! Selector expressions as text, for the hosts where people type them (the `tlspec` CLI, the
//! viewer's search box): `func:relu & in_module:encoder`, `~label:add_1_2 | module:block:2`,
//! `followed_by(func:conv2d, func:relu, 2)`, `downstream_of(label:conv2d_1_1) & func:relu`.
//!
//! Grammar (`|` binds loosest, then `&`, then `~`):
//!
//! ```text
//! expression := conjunction ('|' conjunction)*
//! conjunction:= unary ('&' unary)*
//! unary      := '~' unary | primary
//! primary    := '(' expression ')' | temporal | influence | atom
//! temporal   := ('followed_by' | 'preceded_by') '(' expression ',' expression [',' number] ')'
//! influence  := ('downstream_of' | 'upstream_of') '(' expression ')'
//! atom       := kind ':' value | value            (a bare value means label_contains)
//! kind       := func | label | label_contains | contains | module | in_module
//! value      := word | "quoted text"              (a word runs until space or & | ~ ( ) , ")
//! ```
//!
//! Value predicates (`where`) are host callables and have no text form.

use super::{Selector, SelectorNode};
use crate::error::{CoreError, CoreResult, ErrorKind};

/// Longest expression accepted, in bytes.
pub const MAX_EXPRESSION_BYTES: usize = 64 * 1024;
/// Deepest nesting of parentheses and `~` accepted; bounds the parser's recursion.
pub const MAX_EXPRESSION_DEPTH: usize = 128;

/// Parses a selector expression into a validated [`Selector`].
pub fn parse_expression(text: &str) -> CoreResult<Selector> {
    if text.len() > MAX_EXPRESSION_BYTES {
        return Err(syntax_error(
            0,
            format!(
                "the expression is {} bytes, at most {MAX_EXPRESSION_BYTES} are accepted",
                text.len()
            ),
        ));
    }
    let mut parser = Parser {
        text,
        position: 0,
        nodes: Vec::new(),
        depth: 0,
    };
    let root = parser.expression()?;
    parser.skip_space();
    if parser.position < text.len() {
        return Err(syntax_error(
            parser.position,
            format!("unexpected `{}`", parser.rest_preview()),
        ));
    }
    let selector = Selector {
        nodes: parser.nodes,
        root,
    };
    selector.validate()?;
    Ok(selector)
}

fn syntax_error(position: usize, message: String) -> CoreError {
    CoreError::new(
        ErrorKind::InvalidSelector,
        "selector_expression_syntax",
        format!("selector expression, at byte {position}: {message}"),
        "write kind:value terms (func, label, label_contains, module, in_module) joined by &, | \
         and ~, with parentheses; followed_by(a, b, n) and preceded_by(a, b, n) for neighbours; \
         downstream_of(a) and upstream_of(a) for the ops a reaches or that reach a",
    )
}

fn unknown_kind(position: usize, kind: &str) -> CoreError {
    syntax_error(
        position,
        format!(
            "unknown selector kind `{kind}` (func, label, label_contains, module, in_module); \
             quote a value that contains `:`"
        ),
    )
}

struct Parser<'a> {
    text: &'a str,
    position: usize,
    nodes: Vec<SelectorNode>,
    depth: usize,
}

impl Parser<'_> {
    fn push(&mut self, node: SelectorNode) -> u32 {
        self.nodes.push(node);
        (self.nodes.len() - 1) as u32
    }

    fn skip_space(&mut self) {
        let rest = &self.text[self.position..];
        self.position += rest.len() - rest.trim_start().len();
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_space();
        self.text[self.position..].chars().next()
    }

    fn eat(&mut self, symbol: char) -> bool {
        if self.peek() == Some(symbol) {
            self.position += symbol.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, symbol: char) -> CoreResult<()> {
        if self.eat(symbol) {
            Ok(())
        } else {
            Err(syntax_error(
                self.position,
                format!("expected `{symbol}`, found `{}`", self.rest_preview()),
            ))
        }
    }

    fn rest_preview(&self) -> String {
        let rest = &self.text[self.position..];
        if rest.is_empty() {
            return "end of expression".to_owned();
        }
        rest.chars().take(16).collect()
    }

    fn enter(&mut self) -> CoreResult<()> {
        self.depth += 1;
        if self.depth > MAX_EXPRESSION_DEPTH {
            return Err(syntax_error(
                self.position,
                format!("nested deeper than {MAX_EXPRESSION_DEPTH} levels"),
            ));
        }
        Ok(())
    }

    fn expression(&mut self) -> CoreResult<u32> {
        self.enter()?;
        let mut parts = vec![self.conjunction()?];
        while self.eat('|') {
            parts.push(self.conjunction()?);
        }
        self.depth -= 1;
        Ok(self.combine(parts, SelectorNode::Or))
    }

    fn conjunction(&mut self) -> CoreResult<u32> {
        let mut parts = vec![self.unary()?];
        while self.eat('&') {
            parts.push(self.unary()?);
        }
        Ok(self.combine(parts, SelectorNode::And))
    }

    fn combine(&mut self, parts: Vec<u32>, make: fn(Vec<u32>) -> SelectorNode) -> u32 {
        match parts.as_slice() {
            [only] => *only,
            _ => self.push(make(parts)),
        }
    }

    fn unary(&mut self) -> CoreResult<u32> {
        if self.eat('~') {
            self.enter()?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(self.push(SelectorNode::Not(inner)));
        }
        self.primary()
    }

    fn primary(&mut self) -> CoreResult<u32> {
        if self.eat('(') {
            let inner = self.expression()?;
            self.expect(')')?;
            return Ok(inner);
        }
        let start = self.position;
        let first = self.value()?;
        if (first == "followed_by" || first == "preceded_by") && self.eat('(') {
            return self.temporal(first == "followed_by");
        }
        if (first == "downstream_of" || first == "upstream_of") && self.eat('(') {
            return self.influence(first == "downstream_of");
        }
        if !self.text[self.position..].starts_with(':') {
            // `colour:red` is a mistyped kind, not a label: labels end in digits before `:`.
            if let Some((kind, _)) = first.split_once(':') {
                if kind.chars().all(|c| c.is_ascii_alphabetic() || c == '_') {
                    return Err(unknown_kind(start, kind));
                }
            }
            return Ok(self.push(SelectorNode::LabelContains(first)));
        }
        self.position += 1;
        let value = self.value()?;
        let node = match first.as_str() {
            "func" => SelectorNode::Func(value),
            "label" => SelectorNode::Label(value),
            "label_contains" | "contains" => SelectorNode::LabelContains(value),
            "module" => SelectorNode::Module(value),
            "in_module" => SelectorNode::InModule(value),
            other => return Err(unknown_kind(start, other)),
        };
        Ok(self.push(node))
    }

    fn temporal(&mut self, followed_by: bool) -> CoreResult<u32> {
        self.enter()?;
        let first = self.expression()?;
        self.expect(',')?;
        let other = self.expression()?;
        let within = if self.eat(',') {
            let start = self.position;
            let word = self.value()?;
            word.parse::<u32>().map_err(|_| {
                syntax_error(
                    start,
                    format!("`{word}` is not a window size (a whole number)"),
                )
            })?
        } else {
            1
        };
        self.expect(')')?;
        self.depth -= 1;
        Ok(self.push(if followed_by {
            SelectorNode::FollowedBy {
                first,
                then: other,
                within,
            }
        } else {
            SelectorNode::PrecededBy {
                first,
                before: other,
                within,
            }
        }))
    }

    fn influence(&mut self, downstream: bool) -> CoreResult<u32> {
        self.enter()?;
        let seed = self.expression()?;
        self.expect(')')?;
        self.depth -= 1;
        Ok(self.push(if downstream {
            SelectorNode::DownstreamOf(seed)
        } else {
            SelectorNode::UpstreamOf(seed)
        }))
    }

    /// A quoted string or a bare word. A bare word stops at a `:` only when it is a kind name,
    /// so `label:relu_1_3:2` keeps its pass suffix.
    fn value(&mut self) -> CoreResult<String> {
        self.skip_space();
        let rest = &self.text[self.position..];
        if let Some(quoted) = rest.strip_prefix('"') {
            let Some(end) = quoted.find('"') else {
                return Err(syntax_error(self.position, "unclosed quote".to_owned()));
            };
            self.position += end + 2;
            return Ok(quoted[..end].to_owned());
        }
        let mut end = rest
            .find(|character: char| character.is_whitespace() || "&|~(),\"".contains(character))
            .unwrap_or(rest.len());
        if let Some((kind, _)) = rest[..end].split_once(':') {
            if is_kind(kind) {
                end = kind.len();
            }
        }
        if end == 0 {
            return Err(syntax_error(
                self.position,
                format!("expected a selector, found `{}`", self.rest_preview()),
            ));
        }
        self.position += end;
        Ok(rest[..end].to_owned())
    }
}

fn is_kind(word: &str) -> bool {
    matches!(
        word,
        "func" | "label" | "label_contains" | "contains" | "module" | "in_module"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Selector {
        parse_expression(text).unwrap_or_else(|error| panic!("{text}: {error}"))
    }

    #[test]
    fn kinds_and_precedence() {
        let selector = parse("func:relu & in_module:encoder | ~label:add_1_2:2");
        assert_eq!(
            selector.nodes,
            vec![
                SelectorNode::Func("relu".into()),
                SelectorNode::InModule("encoder".into()),
                SelectorNode::And(vec![0, 1]),
                SelectorNode::Label("add_1_2:2".into()),
                SelectorNode::Not(3),
                SelectorNode::Or(vec![2, 4]),
            ]
        );
        assert_eq!(selector.root, 5);
    }

    #[test]
    fn parentheses_quotes_bare_words_and_temporal() {
        let selector = parse("(module:block:2 | \"conv 1\") & followed_by(func:conv2d, relu, 3)");
        assert_eq!(selector.nodes[0], SelectorNode::Module("block:2".into()));
        assert_eq!(
            selector.nodes[1],
            SelectorNode::LabelContains("conv 1".into())
        );
        assert!(selector.nodes.contains(&SelectorNode::FollowedBy {
            first: 3,
            then: 4,
            within: 3
        }));
    }

    #[test]
    fn influence_terms_take_one_expression() {
        let selector = parse("downstream_of(label:conv2d_1_1 | func:add) & ~upstream_of(output)");
        assert_eq!(
            selector.nodes,
            vec![
                SelectorNode::Label("conv2d_1_1".into()),
                SelectorNode::Func("add".into()),
                SelectorNode::Or(vec![0, 1]),
                SelectorNode::DownstreamOf(2),
                SelectorNode::LabelContains("output".into()),
                SelectorNode::UpstreamOf(4),
                SelectorNode::Not(5),
                SelectorNode::And(vec![3, 6]),
            ]
        );
        // Without parentheses the names are plain label words, as before.
        assert_eq!(
            parse("downstream_of").nodes,
            vec![SelectorNode::LabelContains("downstream_of".into())]
        );
        for bad in [
            "downstream_of(",
            "downstream_of()",
            "upstream_of(func:a, 2)",
            "upstream_of(func:a",
        ] {
            assert_eq!(
                parse_expression(bad).expect_err(bad).code,
                "selector_expression_syntax",
                "{bad}"
            );
        }
        let deep = format!(
            "{}func:a{}",
            "upstream_of(".repeat(10_000),
            ")".repeat(10_000)
        );
        assert!(parse_expression(&deep).is_err());
    }

    #[test]
    fn errors_are_typed_with_positions() {
        for bad in [
            "",
            "func:",
            "colour:red",
            "func:relu &",
            "(func:relu",
            "func:relu )",
            "\"open",
            "followed_by(func:a, func:b, x)",
            "followed_by(func:a, func:b, 0)",
        ] {
            let error = parse_expression(bad).expect_err(bad);
            assert!(
                error.code == "selector_expression_syntax"
                    || error.code == "selector_window_invalid",
                "{bad}: {}",
                error.code
            );
        }
    }

    #[test]
    fn hostile_nesting_is_bounded() {
        let deep = format!("{}func:a{}", "(".repeat(10_000), ")".repeat(10_000));
        assert_eq!(
            parse_expression(&deep).expect_err("too deep").code,
            "selector_expression_syntax"
        );
        let negations = format!("{}func:a", "~".repeat(10_000));
        assert!(parse_expression(&negations).is_err());
        let long = "func:a | ".repeat(20_000);
        assert!(parse_expression(&long).is_err());
    }
}
