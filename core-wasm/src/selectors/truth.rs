//! Three-valued masks over a range of ops (Kleene logic). A finished trace makes every value
//! known; during capture some facts (a module call's outputs, the ops after this one) are not
//! known yet, and the same evaluation reports them as undecided instead of guessing.

/// Values and knownness for ops `start..start + len`.
#[derive(Debug, Clone)]
pub(crate) struct TruthMask {
    pub start: u32,
    pub value: Vec<bool>,
    pub known: Vec<bool>,
}

impl TruthMask {
    /// All known, all `value`.
    pub fn constant(start: u32, len: usize, value: bool) -> Self {
        Self {
            start,
            value: vec![value; len],
            known: vec![true; len],
        }
    }

    pub fn len(&self) -> usize {
        self.value.len()
    }

    /// (value, known) at an absolute op id; outside the range it is known false.
    pub fn at(&self, op: u32) -> (bool, bool) {
        match op.checked_sub(self.start) {
            Some(offset) if (offset as usize) < self.len() => {
                (self.value[offset as usize], self.known[offset as usize])
            }
            _ => (false, true),
        }
    }

    /// Kleene and: false wins even when the other side is unknown.
    pub fn and_with(&mut self, other: &TruthMask) {
        for index in 0..self.len() {
            let (other_value, other_known) = other.at(self.start + index as u32);
            let (value, known) = (self.value[index], self.known[index]);
            self.value[index] = value && other_value;
            self.known[index] = (known && (other_known || !value)) || (other_known && !other_value);
        }
    }

    /// Kleene or: true wins even when the other side is unknown.
    pub fn or_with(&mut self, other: &TruthMask) {
        for index in 0..self.len() {
            let fact = kleene_or(
                (self.value[index], self.known[index]),
                other.at(self.start + index as u32),
            );
            (self.value[index], self.known[index]) = fact;
        }
    }

    /// Negation keeps knownness.
    pub fn negate(&mut self) {
        for value in &mut self.value {
            *value = !*value;
        }
    }
}

/// Kleene or of two (value, known) facts.
pub(crate) fn kleene_or(left: (bool, bool), right: (bool, bool)) -> (bool, bool) {
    let (left_value, left_known) = left;
    let (right_value, right_known) = right;
    (
        left_value || right_value,
        (left_known && (right_known || left_value)) || (right_known && right_value),
    )
}
