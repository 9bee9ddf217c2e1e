import Testing

@Test func placeholderCallContractTests() { #expect(Bool(true)) }
