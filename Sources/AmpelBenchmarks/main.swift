print("ampel-bench: see Benchmarks/README.md")
