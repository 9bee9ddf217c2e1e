import CallpushTestSupport
import Foundation

/// A parsed YAML / JSON value. The deploy files are read by PyYAML (as check_deploy.py and
/// Kubernetes read them: YAML 1.1, `0400` is octal, `<<` merges), handed over as JSON.
enum DeployValue: Equatable, Sendable {
    case object([String: DeployValue])
    case array([DeployValue])
    case string(String)
    case number(Double)
    case bool(Bool)
    case null

    init(json: Any) {
        switch json {
        case let object as [String: Any]: self = .object(object.mapValues(DeployValue.init(json:)))
        case let array as [Any]: self = .array(array.map(DeployValue.init(json:)))
        case let string as String: self = .string(string)
        case let number as NSNumber:
            // JSONSerialization gives booleans as NSNumber too; its objCType tells them apart.
            self = String(cString: number.objCType) == "c" ? .bool(number.boolValue) : .number(number.doubleValue)
        default: self = .null
        }
    }

    subscript(key: String) -> DeployValue {
        if case .object(let object) = self { return object[key] ?? .null }
        return .null
    }

    var object: [String: DeployValue] { if case .object(let o) = self { return o }; return [:] }
    var array: [DeployValue] { if case .array(let a) = self { return a }; return [] }
    var isNull: Bool { self == .null }
    /// A scalar as the text a container would see (numbers without a fraction as integers).
    var string: String? {
        switch self {
        case .string(let s): return s
        case .number(let n): return n == n.rounded() ? String(Int(n)) : String(n)
        case .bool(let b): return b ? "true" : "false"
        default: return nil
        }
    }
    var int: Int? {
        switch self {
        case .number(let n): return Int(n)
        case .string(let s): return Int(s)
        default: return nil
        }
    }
    /// A list of strings (`["a", "b"]`), or one string as a one-element list.
    var strings: [String] {
        if case .string(let s) = self { return [s] }
        return array.compactMap(\.string)
    }
}

/// The documents of deploy/'s YAML files.
enum DeployDocuments {
    /// Every document of each file (relative to `deploy`), parsed by PyYAML.
    static func load(deploy: URL, files: [String]) async throws -> [String: [DeployValue]] {
        let python = try requirePython()
        let script = """
            import json, sys, yaml
            out = {}
            for name in sys.argv[2:]:
                with open(sys.argv[1] + "/" + name) as handle:
                    out[name] = [d for d in yaml.safe_load_all(handle) if d is not None]
            json.dump(out, sys.stdout)
            """
        let result = try await ChildProcess.run(python, ["-c", script, deploy.path] + files,
                                                environment: ProcessInfo.processInfo.environment, timeout: .seconds(60))
        guard result.status == 0 else { throw DeployRunFailure("cannot parse \(files.joined(separator: ", ")): \(result.stderr)") }
        let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
        return DeployValue(json: json).object.mapValues(\.array)
    }

    /// A copy of `deploy` with `edits` (file -> replacements) applied; each replacement must match.
    static func editedCopy(of deploy: URL, _ edits: [String: [(String, String)]]) throws -> URL {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("deploy-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: deploy, to: copy)
        for (file, replacements) in edits {
            let url = copy.appendingPathComponent(file)
            var text = try String(contentsOf: url, encoding: .utf8)
            for (old, new) in replacements {
                guard text.contains(old) else { throw DeployRunFailure("\(file) does not contain \(old)") }
                text = text.replacingOccurrences(of: old, with: new)
            }
            try text.write(to: url, atomically: true, encoding: .utf8)
        }
        return copy
    }

    static func requirePython() throws -> String {
        guard let python = ChildProcess.findExecutable("python3") else { throw DeployRunFailure("python3 with PyYAML is needed (scripts/install-deps)") }
        return python
    }
}

/// Why a deploy run failed: the drift it found, in one readable line (or a few).
struct DeployRunFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
