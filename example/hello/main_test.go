package main

// The quick start prints the sum its worker computed.
func Example() {
	main()
	// Output: 3
}
