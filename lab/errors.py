"""The one error type of the lab: a message that says what was expected and what came, plus a hint."""


class LabError(Exception):
    """An error a user can act on. ``str(err)`` is the message; ``err.hint`` says what to do."""

    def __init__(self, message: str, hint: str = "", status: int = 400):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.status = status

    def to_dict(self) -> dict:
        return {"error": self.message, "hint": self.hint}
