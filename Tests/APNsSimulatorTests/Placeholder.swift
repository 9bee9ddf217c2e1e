import Testing

@Test func placeholderAPNsSimulatorTests() { #expect(Bool(true)) }
