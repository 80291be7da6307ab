"""Clients of agent environments that run elsewhere: `tau_bench` (tau-bench's server; the reference's
`art.tau_bench`). The example tasks that run in-process live in examples/ (`art.examples`)."""
