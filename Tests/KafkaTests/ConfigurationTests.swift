import Testing
@testable import Kafka
