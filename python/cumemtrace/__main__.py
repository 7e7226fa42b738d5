"""python -m cumemtrace, and the `cumemtrace` command of a pip install.

    python -m cumemtrace run [OPTIONS] [--] SCRIPT|-m MODULE|-c CODE [ARGS...]
    python -m cumemtrace doctor
    python -m cumemtrace COMMAND ...      (report, html, diff, ...: as `cumemtrace`)

`run` runs this very Python under the tracer: `python -m cumemtrace run
train.py` is `cumemtrace run -- python train.py` with the Python that runs
this. Everything is done by the `cumemtrace` program (src/cli), installed
with this package; the command that pip installs is main() here, which hands
its arguments to it unchanged. That program builds the PyTorch tracker for
the traced Python before starting it (torch_tracker.py).
"""
import os
import sys

# The options of `cumemtrace run` that take a value as the next argument.
VALUED = {"-o", "--output", "-f", "--format", "--depth", "--min-size", "--top", "--events",
          "--signal"}


def program():
    """The `cumemtrace` program: in this package's prefix (pip), or in the
    installation or build tree this package sits in."""
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "_prefix", "bin", "cumemtrace"),
                      os.path.join(here, "..", "..", "..", "..", "bin", "cumemtrace"),
                      os.path.join(here, "..", "..", "build", "cumemtrace")):
        if os.access(candidate, os.X_OK):
            return os.path.normpath(candidate)
    sys.exit(f"cumemtrace: the cumemtrace program is not installed beside {here}")


def run_arguments(arguments):
    """`run`'s arguments with this Python put before the program, or None
    when no program is given."""
    options, at = [], 0
    while at < len(arguments):
        word = arguments[at]
        if word == "--":
            at += 1
            break
        if word in ("-m", "-c") or not word.startswith("-"):
            break
        options.append(word)
        if word in VALUED and at + 1 < len(arguments):
            options.append(arguments[at + 1])
            at += 1
        at += 1
    rest = arguments[at:]
    if not rest or not sys.executable:
        return None
    return [*options, "--", sys.executable, *rest]


def main(arguments=None, interpreter=False):
    """Hand `arguments` (sys.argv's) to the cumemtrace program. With
    `interpreter` (python -m cumemtrace), `run` runs this Python and
    `doctor` asks about it; the installed command passes them unchanged."""
    arguments = sys.argv[1:] if arguments is None else arguments
    binary = program()
    if interpreter and arguments[:1] == ["run"]:
        if "-h" in arguments[1:2] or "--help" in arguments[1:2]:
            print("usage: python -m cumemtrace run [OPTIONS] [--] SCRIPT|-m MODULE|-c CODE "
                  "[ARGS...]\n\nRuns this Python under the tracer; OPTIONS are those of "
                  "`cumemtrace run` (below).\n")
            sys.stdout.flush()
        else:
            rest = run_arguments(arguments[1:])
            if rest is None:
                sys.exit("usage: python -m cumemtrace run [OPTIONS] [--] SCRIPT|-m MODULE|"
                         "-c CODE [ARGS...]")
            arguments = ["run", *rest]
    if interpreter and arguments[:1] == ["doctor"] and sys.executable:
        arguments = ["doctor", "--python", sys.executable, *arguments[1:]]
    try:
        os.execv(binary, [binary, *arguments])
    except OSError as error:
        sys.exit(f"cumemtrace: cannot run {binary}: {error.strerror}")


if __name__ == "__main__":
    main(interpreter=True)
