import Testing
@testable import PushWorker

@Suite struct OffsetTracking {
    @Test func storesOnlyBelowTheLowestUnfinished() {
        var tracker = OffsetTracker()
        for offset in [10, 11, 12, 13] as [Int64] { let begun = tracker.begin(offset); #expect(begun) }
        do { let r = tracker.finish(12); #expect(r == nil, "11 and 10 are still running") }
        do { let r = tracker.finish(11); #expect(r == nil) }
        do { let r = tracker.finish(10); #expect(r == 13, "10, 11, 12 done: store 13") }
        #expect(tracker.lowestUnfinished == 13)
        do { let r = tracker.finish(13); #expect(r == 14) }
        #expect(tracker.inFlight == 0)
        #expect(tracker.committable == 14)
    }

    @Test func gapsInOffsetsAreFine() {
        var tracker = OffsetTracker()
        tracker.begin(5); tracker.begin(9); tracker.begin(20)
        do { let r = tracker.finish(9); #expect(r == nil) }
        do { let r = tracker.finish(5); #expect(r == 10) }
        do { let r = tracker.finish(20); #expect(r == 21) }
    }

    @Test func redeliveredAndUnknownOffsetsAreIgnored() {
        var tracker = OffsetTracker()
        tracker.begin(1); tracker.begin(2)
        do { let r = tracker.begin(2); #expect(r == false) }
        do { let r = tracker.begin(1); #expect(r == false) }
        do { let r = tracker.finish(7); #expect(r == nil) }
        do { let r = tracker.finish(1); #expect(r == 2) }
        do { let r = tracker.finish(1); #expect(r == nil, "finishing twice changes nothing") }
        do { let r = tracker.begin(1); #expect(r == false, "below the committed position") }
    }

    @Test func randomCompletionOrderNeverStoresPastAnUnfinishedMessage() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            var tracker = OffsetTracker()
            let offsets = Array(Int64(0)..<200)
            for offset in offsets { tracker.begin(offset) }
            var finished = Set<Int64>()
            for offset in offsets.shuffled(using: &generator) {
                finished.insert(offset)
                if let stored = tracker.finish(offset) {
                    #expect((0..<stored).allSatisfy(finished.contains), "every offset below the stored one is finished")
                }
            }
            #expect(tracker.committable == 200)
        }
    }
}
