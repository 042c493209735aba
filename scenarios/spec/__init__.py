"""The scenario specification: the typed model, the loader, sweeps, expectations and units.

Data flows one way from here: a YAML file -> `loader.load_experiment` -> a
validated `model.Scenario` per sweep point -> a topology plan. Nothing in this
package touches the kernel or imports the rest of the testbed.
"""
