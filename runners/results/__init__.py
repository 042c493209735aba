"""Result files: the store (results.json, raw/, atomic writes), the table (runs.csv), derived metrics, metadata.json
(built and read here) and merge. May import errors and paths (and the scenario model)."""
