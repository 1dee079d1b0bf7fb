"""zring.Error: the one exception zring raises."""


class Error(RuntimeError):
    """A zring failure: what happened, where (rank / tensor / node) and what to do.

    kind    the error's kind as text ("timeout", "manifest_mismatch", ...; the
            names of zring.ErrorCode, explained in docs/errors.md)
    code    the same as a zring.ErrorCode
    message the C++ zring::Error's message (str(error) is "kind: message")
    """

    def __init__(self, kind, message):
        super().__init__(kind, message)
        self.kind = str(kind)
        self.message = str(message)

    @property
    def code(self):
        from . import _zring

        return getattr(_zring.ErrorCode, self.kind, _zring.ErrorCode.internal)

    def __str__(self):
        return f"{self.kind}: {self.message}"


Error.__module__ = "zring"
