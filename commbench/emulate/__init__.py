"""A real two-tier fabric on one machine: one Linux network namespace per rack, racks joined by
rate-limited veth links (`commbench emulate`). Bandwidth only: this kernel has tbf/htb, no netem."""
