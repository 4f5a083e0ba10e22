if CommandLine.arguments.dropFirst().first == "geo" { GeoBenchmark.main(Array(CommandLine.arguments.dropFirst(2))) }
print("ampel-bench: see Benchmarks/README.md")
