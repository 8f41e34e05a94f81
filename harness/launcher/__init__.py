"""The local multi-process cluster: node config files, start/stop/kill/pause of controller and
broker processes on 127.0.0.1 by PID, the cluster file clients bootstrap from, node log files."""
