"""The apply pipeline: pin and series model (series), unified diffs (diffparse), the symbolic
planner (plan), sed rendering (render), the one-program-per-target driver (targetprog and the
POSIX sh library target.sh), its answers (answer) and what they make of a host (host_result), drift reports (drift), and the choice of a
shipped series by what a target holds (autoseries)."""
