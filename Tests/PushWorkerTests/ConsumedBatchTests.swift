import Kafka
import Testing

@testable import PushWorker

/// How the consume loop splits a fetched batch into partitions before cutting runs.
@Suite struct ConsumedBatchTests {
    private func batch(_ positions: [(partition: Int32, offset: Int64)]) -> [KafkaConsumerMessage] {
        positions.map { KafkaConsumerMessage(topic: "voip.call-requests", partition: $0.partition, offset: $0.offset, key: nil, value: []) }
    }

    private func split(_ positions: [(partition: Int32, offset: Int64)]) -> [[String]] {
        PushWorkerService.byPartition(batch(positions)).map { $0.map { "\($0.partition):\($0.offset)" } }
    }

    @Test func aBatchIsCutWhereThePartitionChangesIntoSlicesOfIt() {
        #expect(split([]).isEmpty)
        #expect(split([(4, 10)]) == [["4:10"]])
        // As fetched: each partition's messages together.
        #expect(split([(4, 10), (4, 11), (1, 7), (9, 0), (9, 1), (9, 2)]) == [["4:10", "4:11"], ["1:7"], ["9:0", "9:1", "9:2"]])
        // Interleaved: a partition met again later gets a later piece; every message once, in batch order.
        #expect(split([(4, 10), (1, 7), (4, 11), (9, 0), (9, 1), (1, 8), (4, 12)])
                == [["4:10"], ["1:7"], ["4:11"], ["9:0", "9:1"], ["1:8"], ["4:12"]])
    }
}
