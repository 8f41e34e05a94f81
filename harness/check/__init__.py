"""Pure history checkers (Jepsen style): histories, linearizability (Knossos/Porcupine style
search over models), the queue checker, replica agreement (replicas' own logs compared below
their high watermarks), timelines and reports. They read histories and return
verdicts; they never touch a cluster. The same checkers judge real and simulated runs."""
