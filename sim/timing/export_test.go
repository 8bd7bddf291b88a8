package timing

// FloorBytes is floorBytes for the external tests.
var FloorBytes = floorBytes
