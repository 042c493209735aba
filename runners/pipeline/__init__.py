"""One run set's jobs on a network this process builds, in flow order: the runner and its RunContext,
the network and control plane, shaping, MPTCP settings, one run's steps, the rest between runs, pause,
and the shell's commands. May import collect, traffic, linux, results (it writes through the store),
console and errors."""
