"""Linux and process helpers: argument lists run in namespaces, batched ip/tc, /proc and rtnetlink
counters, ss, what runs leave behind, commands.log. Imports nothing of the testbed but errors."""
