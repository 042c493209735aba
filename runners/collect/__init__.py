"""What a run's collectors read (counters, subflows, steering) and the pure assembly of its record."""
