"""harness.sim: the deterministic simulator (README.md, "two drivers"). The real cores (Raft core,
controller, replica) and the real log store run on a virtual clock with a seeded network,
simulated disks that lose unsynced writes on crash, and one nemesis; invariants are checked after
every event and one seed reproduces one run exactly (docs/simulation.md).

Layers, each importing only those before it:
- kernel/: the event queue (the run's one clock, refusing the past) and the network model;
- checks/: the oracle (Raft safety, metadata images, replicas) and diagnoses of failing seeds;
- actors/: simulated processes composed from the real cores and harness.drive: RaftNode with
  its parts (ActiveController, BrokerLifecycle, MetadataPublisher), Broker, AbstractController,
  clients (kv, producer, consumer);
- faults/: the one nemesis and its table of fault shapes;
- runs/: the World (kernel + actors + fault target) and the runs built on it: the quorum run,
  the metadata run, the data-plane Cluster with its scenario, cluster and KIP-101 runs, the
  matrix, many seeds.
Entry points: `kraftlab sim quorum|cluster|matrix` (harness.cli.sim*)."""
