import CallpushTestSupport
@testable import HTTP2Wire
import NIOCore
import NIOHPACK
import Testing

/// Our HPACK decoder: RFC 7541's examples, Huffman strings of every byte, malformed blocks, and the same names and
/// values as NIOHPACK's decoder on long seeded sequences of blocks NIOHPACK's encoder made.
@Suite("HPACK block decoder")
struct HPACKBlockDecoderTests {
    static func bytes(_ hex: String) -> ByteBuffer {
        let digits = Array(hex.utf8)
        var buffer = ByteBuffer()
        var index = 0
        while index + 1 < digits.count {
            let text = String(decoding: digits[index...(index + 1)], as: UTF8.self)
            buffer.writeInteger(UInt8(text, radix: 16)!)
            index += 2
        }
        return buffer
    }

    static func pairs(_ headers: HPACKHeaders) -> [String] { headers.map { "\($0.name): \($0.value)" } }
    static func table(_ decoder: HPACKBlockDecoder) -> [String] { decoder.dynamicTable.map { "\($0.name): \($0.value)" } }

    @Test("RFC 7541 C.3 and C.4: requests without and with Huffman coding, one connection each")
    func requestExamples() throws {
        for blocks in [
            ["828684410f7777772e6578616d706c652e636f6d", "828684be58086e6f2d6361636865",
             "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565"],
            ["828684418cf1e3c2e5f23a6ba0ab90f4ff", "828684be5886a8eb10649cbf",
             "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"],
        ] {
            var decoder = HPACKBlockDecoder(maxHeaderListSize: 1 << 14)
            #expect(Self.pairs(try decoder.decode(Self.bytes(blocks[0])))
                == [":method: GET", ":scheme: http", ":path: /", ":authority: www.example.com"])
            #expect(Self.table(decoder) == [":authority: www.example.com"])
            #expect(decoder.dynamicTableSize == 57)
            #expect(Self.pairs(try decoder.decode(Self.bytes(blocks[1])))
                == [":method: GET", ":scheme: http", ":path: /", ":authority: www.example.com", "cache-control: no-cache"])
            #expect(decoder.dynamicTableSize == 110)
            #expect(Self.pairs(try decoder.decode(Self.bytes(blocks[2])))
                == [":method: GET", ":scheme: https", ":path: /index.html", ":authority: www.example.com", "custom-key: custom-value"])
            #expect(Self.table(decoder) == ["custom-key: custom-value", "cache-control: no-cache", ":authority: www.example.com"])
            #expect(decoder.dynamicTableSize == 164)
        }
    }

    @Test("RFC 7541 C.5 and C.6: responses with eviction after a table size update to 256")
    func responseExamplesWithEviction() throws {
        for blocks in [
            ["3fe1014803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d",
             "4803333037c1c0bf",
             "88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b2076657273696f6e3d31"],
            ["3fe101488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3",
             "4883640effc1c0bf",
             "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007"],
        ] {
            var decoder = HPACKBlockDecoder(maxHeaderListSize: 1 << 14)
            #expect(Self.pairs(try decoder.decode(Self.bytes(blocks[0]))) == [
                ":status: 302", "cache-control: private", "date: Mon, 21 Oct 2013 20:13:21 GMT", "location: https://www.example.com",
            ])
            #expect(decoder.currentMaxTableSize == 256)
            #expect(decoder.dynamicTableSize == 222)
            #expect(Self.pairs(try decoder.decode(Self.bytes(blocks[1]))) == [
                ":status: 307", "cache-control: private", "date: Mon, 21 Oct 2013 20:13:21 GMT", "location: https://www.example.com",
            ])
            #expect(Self.table(decoder) == [
                ":status: 307", "location: https://www.example.com", "date: Mon, 21 Oct 2013 20:13:21 GMT", "cache-control: private",
            ], "`:status: 302` was evicted to make room")
            #expect(Self.pairs(try decoder.decode(Self.bytes(blocks[2]))) == [
                ":status: 200", "cache-control: private", "date: Mon, 21 Oct 2013 20:13:22 GMT", "location: https://www.example.com",
                "content-encoding: gzip", "set-cookie: foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
            ])
            #expect(Self.table(decoder) == [
                "set-cookie: foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1", "content-encoding: gzip",
                "date: Mon, 21 Oct 2013 20:13:22 GMT",
            ])
            #expect(decoder.dynamicTableSize == 215)
        }
    }

    /// Huffman-codes `bytes` with RFC 7541's code (written out here bit by bit, so NIOHPACK's own table checks ours).
    static func huffman(_ bytes: [UInt8], padding: (bits: Int, value: UInt64)? = nil, eos: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        var accumulator: UInt64 = 0
        var count = 0
        func put(_ code: UInt64, _ length: Int) {
            for bit in stride(from: length - 1, through: 0, by: -1) {
                accumulator = accumulator << 1 | (code >> UInt64(bit) & 1)
                count += 1
                if count == 8 {
                    out.append(UInt8(accumulator))
                    accumulator = 0
                    count = 0
                }
            }
        }
        for byte in bytes { put(UInt64(HPACKHuffman.codes[Int(byte)].code), Int(HPACKHuffman.codes[Int(byte)].length)) }
        if eos { put(0x3fff_ffff, 30) }
        if let padding {
            put(padding.value, padding.bits)
        } else if count > 0 {
            put(0xFF, 8 - count)  // EOS prefix
        }
        return out
    }

    /// A block of one literal field without indexing: literal name `x`, `value` as the (Huffman) string.
    static func literalBlock(huffmanValue value: [UInt8]) -> ByteBuffer {
        var block = ByteBuffer()
        block.writeBytes([0x00, 0x01, UInt8(ascii: "x")])
        precondition(value.count < 127)
        block.writeInteger(UInt8(0x80 | value.count))
        block.writeBytes(value)
        return block
    }

    @Test("Huffman strings of every byte value decode as NIOHPACK decodes them; valid text round-trips")
    func huffmanEveryByte() throws {
        for chunk in stride(from: 0, to: 256, by: 32) {
            let raw = (chunk..<(chunk + 32)).map { UInt8($0) }
            let block = Self.literalBlock(huffmanValue: Self.huffman(raw))
            var ours = HPACKBlockDecoder(maxHeaderListSize: 1 << 14)
            var theirs = HPACKDecoder(allocator: ByteBufferAllocator())
            var copy = block
            #expect(Self.pairs(try ours.decode(block)) == Self.pairs(try theirs.decodeHeaders(from: &copy)), "bytes \(chunk)..<\(chunk + 32)")
        }
        let text = "/3/device/" + String(repeating: "a1b2c3d4", count: 8) + " ~!é€😀"
        var ours = HPACKBlockDecoder(maxHeaderListSize: 1 << 14)
        #expect(Self.pairs(try ours.decode(Self.literalBlock(huffmanValue: Self.huffman(Array(text.utf8))))) == ["x: \(text)"])
    }

    @Test("malformed Huffman strings are refused: EOS inside, padding of 8 bits or more, padding that is not all ones")
    func malformedHuffman() {
        let cases: [(String, [UInt8])] = [
            ("EOS inside", Self.huffman(Array("ab".utf8), eos: true)),
            ("a whole byte of padding", Self.huffman(Array("abc".utf8)) + [0xFF]),
            ("padding with a zero bit", Self.huffman(Array("a".utf8), padding: (3, 0b110))),
        ]
        for (name, value) in cases {
            var ours = HPACKBlockDecoder(maxHeaderListSize: 1 << 14)
            #expect(throws: HPACKBlockDecoder.Failure.invalidHuffman, "\(name)") { try ours.decode(Self.literalBlock(huffmanValue: value)) }
            var theirs = HPACKDecoder(allocator: ByteBufferAllocator())
            var copy = Self.literalBlock(huffmanValue: value)
            #expect(throws: (any Error).self, "NIOHPACK refuses it too: \(name)") { try theirs.decodeHeaders(from: &copy) }
        }
    }

    @Test("malformed blocks are refused with the reason")
    func malformedBlocks() {
        let cases: [(String, String, HPACKBlockDecoder.Failure)] = [
            ("index 0", "80", .invalidIndex(0)),
            ("index past the tables", "be", .invalidIndex(62)),
            ("integer cut short", "ff", .truncated),
            ("integer too large", "ffffffffffff0f", .integerOverflow),
            ("string cut short", "0001", .truncated),
            ("string longer than the block", "00017805", .truncated),
            ("empty literal name", "000001", .emptyName),
            ("table size update above 4096", "3fe21f", .tableSizeUpdateAboveLimit(4097)),
            ("table size update after a field", "8220", .tableSizeUpdateMisplaced),
            ("three table size updates", "202020", .tableSizeUpdateMisplaced),
        ]
        for (name, hex, failure) in cases {
            var decoder = HPACKBlockDecoder(maxHeaderListSize: 1 << 14)
            #expect(throws: failure, "\(name)") { try decoder.decode(Self.bytes(hex)) }
        }
        var small = HPACKBlockDecoder(maxHeaderListSize: 100)
        #expect(throws: HPACKBlockDecoder.Failure.headerListTooLarge) {
            try small.decode(Self.bytes("828684410f7777772e6578616d706c652e636f6d"))  // 4 fields of 32 + n bytes each
        }
    }

    static func randomText(_ random: inout SplitMix, ascii: Bool) -> String {
        let alphabet: [Character] = ascii
            ? Array("abcdefghijklmnopqrstuvwxyz0123456789-_.~/:; ,=")
            : Array("abcXYZ019 -/:é€ßж漢😀\u{7f}\t")
        return String((0..<Int.random(in: 0...40, using: &random)).map { _ in alphabet.randomElement(using: &random)! })
    }

    @Test("the same names and values as NIOHPACK on 2,000 seeded blocks NIOHPACK encoded (indexing, Huffman, table sizes)",
          arguments: [1, 2, 3, 4])
    func sameAsNIOHPACK(seed: UInt64) throws {
        var random = SplitMix(state: seed)
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator(), useHuffmanEncoding: seed % 2 == 0)
        var theirs = HPACKDecoder(allocator: ByteBufferAllocator())
        var ours = HPACKBlockDecoder(maxHeaderListSize: 1 << 14)
        let names = [":path", ":method", "authorization", "apns-id", "apns-topic", "x-custom", "content-length", "date", "cookie"]
        for round in 0..<500 {
            if Int.random(in: 0..<40, using: &random) == 0 {
                try encoder.setDynamicTableSize(Int.random(in: 0...4096, using: &random))
            }
            var headers = HPACKHeaders()
            for _ in 0..<Int.random(in: 1...12, using: &random) {
                let name = Bool.random(using: &random) ? names.randomElement(using: &random)! : Self.randomText(&random, ascii: true).lowercased()
                let value = Self.randomText(&random, ascii: Bool.random(using: &random))
                let indexing: HPACKIndexing = [.indexable, .nonIndexable, .neverIndexed].randomElement(using: &random)!
                headers.add(name: name.isEmpty ? "n" : name, value: value, indexing: indexing)
            }
            var block = ByteBuffer()
            try encoder.encode(headers: headers, to: &block)
            var copy = block
            let expected = try theirs.decodeHeaders(from: &copy)
            #expect(Self.pairs(try ours.decode(block)) == Self.pairs(expected), "seed \(seed) round \(round)")
            #expect(Self.pairs(expected) == Self.pairs(headers))
        }
    }

    @Test("20,000 mutated blocks: no trap, and whatever decodes has only entries from the block's own bytes")
    func mutatedBlocksNeverTrap() throws {
        var random = SplitMix(state: 99)
        let seeds = [
            "828684410f7777772e6578616d706c652e636f6d", "828684418cf1e3c2e5f23a6ba0ab90f4ff",
            "3fe101488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3",
        ].map { Array(Self.bytes($0).readableBytesView) }
        var decoder = HPACKBlockDecoder(maxHeaderListSize: 1 << 14)
        var decoded = 0
        for _ in 0..<20_000 {
            var bytes = seeds.randomElement(using: &random)!
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                switch Int.random(in: 0..<3, using: &random) {
                case 0 where !bytes.isEmpty: bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                case 1 where !bytes.isEmpty: bytes.removeLast(Int.random(in: 0...min(3, bytes.count), using: &random))
                default: bytes.insert(UInt8.random(in: 0...255, using: &random), at: Int.random(in: 0...bytes.count, using: &random))
                }
            }
            if let headers = try? decoder.decode(ByteBuffer(bytes: bytes)) {
                decoded += 1
                #expect(headers.count <= bytes.count, "every field takes at least one byte")
            }
            #expect(decoder.dynamicTableSize <= decoder.currentMaxTableSize)
        }
        #expect(decoded > 0, "some mutations stay valid")
    }
}
