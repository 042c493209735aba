"""What a run's collectors read (counters, pings, subflows, steering, capture) and the pure assembly of its
record, each with its own argument lists and parsers. May import traffic (the tool's report), linux and errors."""
