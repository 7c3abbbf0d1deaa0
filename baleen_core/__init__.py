"""The science of openbaleen: corpus reading, claims, the demo world and (later) FLIPR, the
condensers, the reader and the metrics. Nothing in this package imports Prefect: flows and tasks
adapt it to orchestration, so every function here runs and tests on its own."""
