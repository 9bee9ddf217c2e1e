import NIOCore
import NIOHPACK

/// Decodes HPACK header blocks (RFC 7541) into `HPACKHeaders`: the static table, the dynamic table with its
/// size updates and evictions, literals with and without indexing, and Huffman strings through
/// ``HPACKHuffman``'s table-driven decoder. One per connection and direction (the dynamic table is the
/// connection's state). Malformed input throws; the caller treats it as a COMPRESSION_ERROR.
///
/// It replaces NIOHPACK's `HPACKDecoder` on our connections (whose Huffman decoding dominated the
/// simulator's profile under h2load, which sends `:path` as a Huffman literal on every request) and decodes to
/// the same names and values as that decoder (`HPACKBlockDecoderTests` checks both on the same blocks).
public struct HPACKBlockDecoder {
    /// Why a block could not be decoded.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case truncated
        case integerOverflow
        case invalidIndex(Int)
        case invalidHuffman
        case emptyName
        case invalidStartByte(UInt8)
        case tableSizeUpdateAboveLimit(Int)
        case tableSizeUpdateMisplaced
        case headerListTooLarge

        public var description: String {
            switch self {
            case .truncated: "truncated header block"
            case .integerOverflow: "integer overflow"
            case .invalidIndex(let index): "invalid table index \(index)"
            case .invalidHuffman: "invalid Huffman string"
            case .emptyName: "empty header name"
            case .invalidStartByte(let byte): "invalid start byte \(byte)"
            case .tableSizeUpdateAboveLimit(let size): "dynamic table size update to \(size) above the limit"
            case .tableSizeUpdateMisplaced: "dynamic table size update after a header field or more than two"
            case .headerListTooLarge: "header list too large"
            }
        }
    }

    /// RFC 7541 Appendix A.
    static let staticTable: [(name: String, value: String)] = [
        (":authority", ""),
        (":method", "GET"),
        (":method", "POST"),
        (":path", "/"),
        (":path", "/index.html"),
        (":scheme", "http"),
        (":scheme", "https"),
        (":status", "200"),
        (":status", "204"),
        (":status", "206"),
        (":status", "304"),
        (":status", "400"),
        (":status", "404"),
        (":status", "500"),
        ("accept-charset", ""),
        ("accept-encoding", "gzip, deflate"),
        ("accept-language", ""),
        ("accept-ranges", ""),
        ("accept", ""),
        ("access-control-allow-origin", ""),
        ("age", ""),
        ("allow", ""),
        ("authorization", ""),
        ("cache-control", ""),
        ("content-disposition", ""),
        ("content-encoding", ""),
        ("content-language", ""),
        ("content-length", ""),
        ("content-location", ""),
        ("content-range", ""),
        ("content-type", ""),
        ("cookie", ""),
        ("date", ""),
        ("etag", ""),
        ("expect", ""),
        ("expires", ""),
        ("from", ""),
        ("host", ""),
        ("if-match", ""),
        ("if-modified-since", ""),
        ("if-none-match", ""),
        ("if-range", ""),
        ("if-unmodified-since", ""),
        ("last-modified", ""),
        ("link", ""),
        ("location", ""),
        ("max-forwards", ""),
        ("proxy-authenticate", ""),
        ("proxy-authorization", ""),
        ("range", ""),
        ("referer", ""),
        ("refresh", ""),
        ("retry-after", ""),
        ("server", ""),
        ("set-cookie", ""),
        ("strict-transport-security", ""),
        ("transfer-encoding", ""),
        ("user-agent", ""),
        ("vary", ""),
        ("via", ""),
        ("www-authenticate", "")
    ]

    /// The most the peer's encoder may use (SETTINGS_HEADER_TABLE_SIZE; we never announce another value).
    public let maxTableSize: Int
    /// The most a decoded list may weigh (each field: name + value + 32 bytes).
    public let maxHeaderListSize: Int
    /// Newest entry first (dynamic index 62 is `entries[0]`).
    private var entries = CircularBuffer<(name: String, value: String)>(initialCapacity: 16)
    private var tableSize = 0
    /// The size the encoder chose with its last update (≤ ``maxTableSize``).
    public private(set) var currentMaxTableSize: Int

    public init(maxTableSize: Int = 4096, maxHeaderListSize: Int) {
        self.maxTableSize = maxTableSize
        self.maxHeaderListSize = maxHeaderListSize
        self.currentMaxTableSize = maxTableSize
    }

    /// The dynamic table's entries, newest first, and its size (for tests).
    public var dynamicTable: [(name: String, value: String)] { Array(entries) }
    public var dynamicTableSize: Int { tableSize }

    /// Decodes one complete header block (all of `block`'s readable bytes).
    public mutating func decode(_ block: ByteBuffer) throws(Failure) -> HPACKHeaders {
        var fieldsDecoded: [(String, String)] = []
        fieldsDecoded.reserveCapacity(12)
        var listSize = 0
        var updates = 0
        var fields = 0
        try block.withUnsafeReadableBytes { (bytes: UnsafeRawBufferPointer) throws(Failure) in
            var reader = Reader(bytes: bytes)
            while !reader.atEnd {
                let first = reader.peek
                let name: String
                let value: String
                if first & 0x80 != 0 {
                    let index = try reader.integer(prefix: 7)
                    (name, value) = try entry(index)
                } else if first & 0xC0 == 0x40 {
                    (name, value) = try literal(&reader, prefix: 6)
                    add(name, value)
                } else if first & 0xE0 == 0x20 {
                    guard fields == 0, updates < 2 else { throw .tableSizeUpdateMisplaced }
                    updates += 1
                    let size = try reader.integer(prefix: 5)
                    guard size <= maxTableSize else { throw .tableSizeUpdateAboveLimit(size) }
                    currentMaxTableSize = size
                    evict(toFit: 0)
                    continue
                } else if first & 0xE0 == 0x00 {
                    // 0000xxxx without indexing, 0001xxxx never indexed: the same to a receiver.
                    (name, value) = try literal(&reader, prefix: 4)
                } else {
                    throw .invalidStartByte(first)
                }
                fields += 1
                listSize += name.utf8.count + value.utf8.count + 32
                guard listSize <= maxHeaderListSize else { throw .headerListTooLarge }
                fieldsDecoded.append((name, value))
            }
        }
        // Not `HPACKHeaders.add`, which traps on a non-ASCII name (a peer's bytes must never trap); the
        // request and answer checks refuse such names. The fields' indexing modes are not kept: a receiver
        // has no use for them.
        return HPACKHeaders(fieldsDecoded)
    }

    /// The static or dynamic table entry at `index` (1-based, RFC 7541 §2.3.3).
    private func entry(_ index: Int) throws(Failure) -> (name: String, value: String) {
        if index >= 1, index <= Self.staticTable.count { return Self.staticTable[index - 1] }
        let dynamic = index - Self.staticTable.count - 1
        guard dynamic >= 0, dynamic < entries.count else { throw .invalidIndex(index) }
        return entries[entries.index(entries.startIndex, offsetBy: dynamic)]
    }

    /// A literal field: name (indexed when the prefix integer is not 0, else a string) and value.
    private mutating func literal(_ reader: inout Reader, prefix: Int) throws(Failure) -> (name: String, value: String) {
        let index = try reader.integer(prefix: prefix)
        let name: String
        if index == 0 {
            name = try string(&reader)
            guard !name.isEmpty else { throw .emptyName }
        } else {
            name = try entry(index).name
        }
        return (name, try string(&reader))
    }

    /// A string literal. Huffman strings of at least ``memoMinimumLength`` bytes that a recent block also carried
    /// are not decoded again: clients send some fields as literals on every request — nghttp2 never indexes
    /// `authorization` (the provider token, ~140 coded bytes) and never indexes `:path` — so most of a request's
    /// Huffman bytes repeat the previous request's.
    private mutating func string(_ reader: inout Reader) throws(Failure) -> String {
        let (coded, huffman) = try reader.stringBytes()
        guard huffman else { return String(decoding: coded, as: UTF8.self) }
        guard coded.count >= Self.memoMinimumLength else {
            guard let text = HPACKHuffman.decode(coded) else { throw .invalidHuffman }
            return text
        }
        for entry in memo where entry.coded.count == coded.count {
            if entry.coded.withUnsafeBytes({ $0.elementsEqual(coded) }) { return entry.text }
        }
        guard let text = HPACKHuffman.decode(coded) else { throw .invalidHuffman }
        if memo.count < Self.memoCapacity {
            memo.append((Array(coded), text))
        } else {
            memo[nextMemoSlot] = (Array(coded), text)
        }
        nextMemoSlot = (nextMemoSlot + 1) % Self.memoCapacity
        return text
    }

    /// Recently decoded long Huffman strings (coded bytes → text), replaced round-robin.
    private var memo: [(coded: [UInt8], text: String)] = []
    private var nextMemoSlot = 0
    static let memoCapacity = 4
    static let memoMinimumLength = 16

    /// Adds an entry (RFC 7541 §4.4): evicts the oldest until it fits; one larger than the table empties it.
    private mutating func add(_ name: String, _ value: String) {
        let size = name.utf8.count + value.utf8.count + 32
        guard size <= currentMaxTableSize else {
            entries.removeAll(keepingCapacity: true)
            tableSize = 0
            return
        }
        evict(toFit: size)
        entries.prepend((name, value))
        tableSize += size
    }

    private mutating func evict(toFit size: Int) {
        while tableSize + size > currentMaxTableSize, let oldest = entries.popLast() {
            tableSize -= oldest.name.utf8.count + oldest.value.utf8.count + 32
        }
    }

    /// Reads HPACK primitives from the block's bytes.
    struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        var atEnd: Bool { offset >= bytes.count }
        var peek: UInt8 { bytes[offset] }

        /// An integer with an N-bit prefix (RFC 7541 §5.1), at most 2^31 − 1 here (no field needs more).
        mutating func integer(prefix: Int) throws(Failure) -> Int {
            guard offset < bytes.count else { throw .truncated }
            let mask = (1 << prefix) - 1
            var value = Int(bytes[offset]) & mask
            offset += 1
            guard value == mask else { return value }
            var shift = 0
            while true {
                guard offset < bytes.count else { throw .truncated }
                let byte = Int(bytes[offset])
                offset += 1
                guard shift <= 28 else { throw .integerOverflow }
                value += (byte & 0x7F) << shift
                guard value <= Int(Int32.max) else { throw .integerOverflow }
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
        }

        /// A string literal's bytes and whether they are Huffman-coded (RFC 7541 §5.2). Text is made from them
        /// with ill-formed UTF-8 repaired (U+FFFD), as NIOHPACK does.
        mutating func stringBytes() throws(Failure) -> (UnsafeRawBufferPointer, huffman: Bool) {
            guard offset < bytes.count else { throw .truncated }
            let huffman = bytes[offset] & 0x80 != 0
            let length = try integer(prefix: 7)
            guard length <= bytes.count - offset else { throw .truncated }
            let slice = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)])
            offset += length
            return (slice, huffman)
        }
    }
}
