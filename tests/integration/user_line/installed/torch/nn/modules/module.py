"""torch.nn.Module's call path, as PyTorch's own frames show in a stack:
__call__ -> _wrapped_call_impl -> _call_impl -> forward."""


class Module:
    def __call__(self, *args):
        return self._wrapped_call_impl(*args)

    def _wrapped_call_impl(self, *args):
        return self._call_impl(*args)

    def _call_impl(self, *args):
        return self.forward(*args)  # CALL-IMPL-LINE
