package transport

// DeadlineCut is deadlineCut, for the tests of package transport_test.
var DeadlineCut = deadlineCut
