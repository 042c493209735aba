"""Result files: the store (results.json, raw/, runs.csv, atomic writes), derived metrics, metadata.json
(built and read here) and merge. May import errors and paths (and the scenario model)."""
