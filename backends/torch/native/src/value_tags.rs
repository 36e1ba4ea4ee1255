//! How a torch capture names a tensor it does not hold: a tag in the tensor's `__dict__`, under
//! `ID_ATTRIBUTE` (`_torchlens_id`), mapping the capture's serial to the value id (`Capture._name`
//! in `backends/torch/capture.py` is the definition). A tag dies with its tensor, so an id is
//! never read off a different tensor that took a dead one's address.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::types::{PyDict, PyString};

/// The attribute a tagged tensor keeps its tags in, and the key of one capture among them.
pub struct ValueTags {
    /// `ID_ATTRIBUTE` of `capture.py`.
    pub attribute: Py<PyString>,
    /// The capture's serial (`Capture.serial`).
    pub serial: Py<PyAny>,
}

impl ValueTags {
    /// The value id this capture's tag on `tensor` names, if it carries one.
    pub fn value_id(&self, py: Python<'_>, tensor: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let own = tensor.getattr(intern!(py, "__dict__"))?;
        let Some(tags) = own.cast::<PyDict>()?.get_item(self.attribute.bind(py))? else {
            return Ok(None);
        };
        match tags.cast::<PyDict>()?.get_item(self.serial.bind(py))? {
            Some(value_id) => Ok(Some(value_id.extract()?)),
            None => Ok(None),
        }
    }

    /// Tags `tensor` as this capture's value `value_id` (other captures' tags stay).
    pub fn tag(&self, py: Python<'_>, tensor: &Bound<'_, PyAny>, value_id: u64) -> PyResult<()> {
        let own = tensor.getattr(intern!(py, "__dict__"))?;
        let attribute = self.attribute.bind(py);
        match own.cast::<PyDict>()?.get_item(attribute)? {
            Some(tags) => tags
                .cast::<PyDict>()?
                .set_item(self.serial.bind(py), value_id),
            None => {
                let tags = PyDict::new(py);
                tags.set_item(self.serial.bind(py), value_id)?;
                tensor.setattr(attribute, tags)
            }
        }
    }

    /// The Python objects held, for a holder's `__traverse__`.
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.attribute)?;
        visit.call(&self.serial)
    }
}
