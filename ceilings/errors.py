"""The one exception type for errors a user can cause."""


class AdvisorError(Exception):
    """A problem with the user's input: a bad file, an unknown name, a config that cannot run.

    The message names the input and the fix, fits on one line, and the CLI prints it to stderr
    and exits with status 2. Anything else that escapes is a bug in the advisor.
    """

    def __init__(self, message: str):
        super().__init__(" ".join(message.split()))
