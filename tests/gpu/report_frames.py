"""report_frames.py - a stack's Python lines in one script, for the GPU checks.

The checks run a script whose lines are marked (LEAK-, HELD-, OOM-, SITE-)
and look for those lines in a report's stacks: the frames that are Python
lines of that script, innermost first, and the innermost of them, the site.
"""


def script_frames(report, stack_id, script):
    """The frames of stack `stack_id` that are Python lines of a file whose
    path ends with `script`, innermost first ([] for a stack not there)."""
    frames = {f["id"]: f for f in report["frames"]}
    stack = next((s for s in report["stacks"] if s["id"] == stack_id), None)
    return [frames[i] for i in (stack or {}).get("frames", [])
            if frames[i].get("python") and (frames[i].get("file") or "").endswith(script)]


def site_line(report, stack_id, script):
    """The innermost line of `script` in the stack: the site, or None."""
    found = script_frames(report, stack_id, script)
    return found[0]["line"] if found else None
