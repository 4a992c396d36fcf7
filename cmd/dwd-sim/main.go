package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "dwd-sim: the simulated seed is not built yet; see README.md")
	os.Exit(2)
}
