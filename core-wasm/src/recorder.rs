//! A small writer of raw events, so tests, benchmarks and the demo describe a model run in a
//! few lines. It hands out tensor and module ids the way an adapter would.

use crate::events::{
    ArgRef, ModuleDecl, ModuleId, OpEvent, ParamDecl, PayloadSlot, RawEvent, TensorDesc, TensorId,
};

/// Accumulates events in capture order.
#[derive(Debug, Default)]
pub struct EventRecorder {
    pub events: Vec<RawEvent>,
    next_tensor: TensorId,
    next_module: ModuleId,
    /// When set, every recorded value gets a payload slot equal to its tensor id.
    pub keep_payloads: bool,
}

impl EventRecorder {
    /// A recorder that keeps (assigns payload slots to) every value.
    pub fn keeping_payloads() -> Self {
        Self {
            keep_payloads: true,
            ..Self::default()
        }
    }

    fn value(&mut self, shape: &[u64], dtype: &str) -> TensorDesc {
        let tensor = self.next_tensor;
        self.next_tensor += 1;
        TensorDesc {
            tensor,
            shape: shape.into(),
            dtype: crate::dtype::Dtype::from_name(dtype),
            payload: self.keep_payloads.then_some(tensor as PayloadSlot),
        }
    }

    /// Declares a module under one or more addresses; returns its id.
    pub fn module(&mut self, addresses: &[&str], class_name: &str) -> ModuleId {
        self.declare_module(addresses, class_name, false)
    }

    /// Declares a container of modules (a list or dict of modules).
    pub fn container(&mut self, address: &str, class_name: &str) -> ModuleId {
        self.declare_module(&[address], class_name, true)
    }

    fn declare_module(
        &mut self,
        addresses: &[&str],
        class_name: &str,
        container: bool,
    ) -> ModuleId {
        let id = self.next_module;
        self.next_module += 1;
        self.events.push(RawEvent::Module(ModuleDecl {
            id,
            addresses: addresses
                .iter()
                .map(|address| address.to_string())
                .collect(),
            class_name: class_name.to_string(),
            container,
            training: false,
        }));
        id
    }

    /// Declares a parameter of `module`; returns its tensor id.
    pub fn param(&mut self, module: ModuleId, address: &str, shape: &[u64]) -> TensorId {
        let tensor = self.next_tensor;
        self.next_tensor += 1;
        self.events.push(RawEvent::Param(ParamDecl {
            tensor,
            address: address.to_string(),
            module,
            shape: shape.into(),
            dtype: crate::dtype::Dtype::Float32,
            trainable: true,
        }));
        tensor
    }

    /// A model input.
    pub fn input(&mut self, name: &str, shape: &[u64]) -> TensorId {
        let value = self.value(shape, "float32");
        let tensor = value.tensor;
        self.events.push(RawEvent::Input {
            name: name.to_string(),
            value,
        });
        tensor
    }

    /// A value read from outside the forward.
    pub fn constant(&mut self, shape: &[u64]) -> TensorId {
        let value = self.value(shape, "float32");
        let tensor = value.tensor;
        self.events.push(RawEvent::Constant { value });
        tensor
    }

    /// An op with one float32 output.
    pub fn op(&mut self, func: &str, args: &[TensorId], shape: &[u64]) -> TensorId {
        self.op_typed(func, args, shape, "float32")
    }

    /// An op with one output of the given dtype.
    pub fn op_typed(
        &mut self,
        func: &str,
        args: &[TensorId],
        shape: &[u64],
        dtype: &str,
    ) -> TensorId {
        let value = self.value(shape, dtype);
        let tensor = value.tensor;
        self.push_op(func, args, vec![value], false);
        tensor
    }

    /// An op with several outputs of one shape.
    pub fn multi_output_op(
        &mut self,
        func: &str,
        args: &[TensorId],
        shape: &[u64],
        count: usize,
    ) -> Vec<TensorId> {
        let outputs: Vec<TensorDesc> = (0..count).map(|_| self.value(shape, "float32")).collect();
        let tensors = outputs.iter().map(|output| output.tensor).collect();
        self.push_op(func, args, outputs, false);
        tensors
    }

    /// An in-place op: writes into `target` (its first argument) and returns it.
    pub fn in_place_op(
        &mut self,
        func: &str,
        target: TensorId,
        others: &[TensorId],
        shape: &[u64],
    ) -> TensorId {
        let mut args = vec![target];
        args.extend_from_slice(others);
        let payload = self.keep_payloads.then_some(target as PayloadSlot);
        self.push_op(
            func,
            &args,
            vec![TensorDesc {
                tensor: target,
                shape: shape.into(),
                dtype: crate::dtype::Dtype::Float32,
                payload,
            }],
            true,
        );
        target
    }

    fn push_op(&mut self, func: &str, args: &[TensorId], outputs: Vec<TensorDesc>, in_place: bool) {
        self.events.push(RawEvent::Op(OpEvent {
            func: func.to_string(),
            args: args
                .iter()
                .enumerate()
                .map(|(position, &tensor)| ArgRef {
                    tensor,
                    position: position as u32,
                    keyword: None,
                })
                .collect(),
            outputs: outputs.into(),
            in_place,
            attributes: Vec::new(),
            source: None,
        }));
    }

    /// A module call starts.
    pub fn enter(&mut self, module: ModuleId) {
        self.events.push(RawEvent::Enter { module });
    }

    /// A module call ends, returning `outputs`.
    pub fn exit(&mut self, module: ModuleId, outputs: &[TensorId]) {
        self.events.push(RawEvent::Exit {
            module,
            outputs: outputs.to_vec(),
        });
    }

    /// A model output.
    pub fn output(&mut self, name: &str, tensor: TensorId) {
        self.events.push(RawEvent::Output {
            name: name.to_string(),
            tensor,
        });
    }

    /// A module buffer read during the forward; returns its tensor id.
    pub fn buffer(&mut self, address: &str, shape: &[u64]) -> TensorId {
        let value = self.value(shape, "float32");
        let tensor = value.tensor;
        self.events.push(RawEvent::Buffer {
            address: address.to_string(),
            value,
        });
        tensor
    }

    /// An edit the adapter applied to `value` (an `intervene=` rule fired).
    pub fn edit(&mut self, value: TensorId, rule: &str, action: &str, timing: &str) {
        self.events.push(RawEvent::Edit {
            value,
            rule: rule.to_string(),
            action: action.to_string(),
            timing: timing.to_string(),
        });
    }

    /// A tensor id no event declares (what an adapter sends when an op reads a value it
    /// never reported); the core inserts a constant for it.
    pub fn undeclared(&mut self) -> TensorId {
        let tensor = self.next_tensor;
        self.next_tensor += 1;
        tensor
    }

    /// A whole `Linear` call: enter, `linear` reading the module's weight and bias, exit.
    pub fn linear(
        &mut self,
        module: ModuleId,
        weight: TensorId,
        bias: TensorId,
        input: TensorId,
        shape: &[u64],
    ) -> TensorId {
        self.enter(module);
        let output = self.op("linear", &[input, weight, bias], shape);
        self.exit(module, &[output]);
        output
    }
}
