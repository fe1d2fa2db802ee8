//go:build race

package main

// raceEnabled says the test runs with the race detector, so the programs
// it builds are built with it too.
const raceEnabled = true
