import Foundation

/// docs/openapi.json, and a small validator of real responses against it: the status code and
/// content type must be documented for the operation, and a JSON body must match the schema
/// (types, required fields, enums, and no undocumented fields).
struct OpenAPIDocument {
    let root: [String: Any]

    static func load() throws -> OpenAPIDocument {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/openapi.json")
        let data = try Data(contentsOf: url)
        guard let root = try JSONSerialization.jsonObject(with: data) as? [String: Any] else { throw Failure(message: "not an object") }
        return OpenAPIDocument(root: root)
    }

    struct Failure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    /// Problems with `answer` as the response of `method` on the documented `path` template; empty when it conforms.
    func check(method: String, path: String, answer: HTTPAnswer) -> [String] {
        guard let paths = root["paths"] as? [String: Any], let item = paths[path] as? [String: Any],
              let operation = item[method.lowercased()] as? [String: Any],
              let responses = operation["responses"] as? [String: Any] else {
            return ["\(method) \(path) is not documented"]
        }
        guard let response = responses[String(answer.status)] as? [String: Any] else {
            return ["\(method) \(path): status \(answer.status) is not documented"]
        }
        let contentType = answer.contentType.split(separator: ";").first.map(String.init) ?? ""
        guard let content = response["content"] as? [String: Any], let media = content[contentType] as? [String: Any] else {
            return ["\(method) \(path) \(answer.status): content type \(contentType) is not documented"]
        }
        if contentType.hasSuffix("json"), let schema = media["schema"] {
            guard let body = try? JSONSerialization.jsonObject(with: answer.body) else { return ["\(method) \(path): body is not JSON"] }
            return validate(body, schema, at: "$")
        }
        if contentType == "text/event-stream", let dataSchema = media["x-event-data"] {
            return EndToEndTests.sseEvents(answer.text).filter { $0.event == "status" }.flatMap { event -> [String] in
                guard let body = try? JSONSerialization.jsonObject(with: Data(event.data.utf8)) else { return ["event data is not JSON"] }
                return validate(body, dataSchema, at: "event")
            }
        }
        return []
    }

    func resolve(_ schema: Any) -> [String: Any] {
        guard let object = schema as? [String: Any] else { return [:] }
        guard let ref = object["$ref"] as? String else { return object }
        let name = ref.replacingOccurrences(of: "#/components/schemas/", with: "")
        let schemas = (root["components"] as? [String: Any])?["schemas"] as? [String: Any]
        return resolve(schemas?[name] ?? [:])
    }

    func validate(_ value: Any, _ rawSchema: Any, at path: String) -> [String] {
        let schema = resolve(rawSchema)
        if let choices = schema["oneOf"] as? [Any] {
            return choices.contains { validate(value, $0, at: path).isEmpty } ? [] : ["\(path): matches none of oneOf"]
        }
        var types: [String] = []
        if let type = schema["type"] as? String { types = [type] } else if let list = schema["type"] as? [String] { types = list }
        if !types.isEmpty, !types.contains(where: { Self.matches(value, $0) }) {
            return ["\(path): \(value) is not \(types)"]
        }
        if let allowed = schema["enum"] as? [String], let text = value as? String, !allowed.contains(text) {
            return ["\(path): \(text) not in \(allowed)"]
        }
        var problems: [String] = []
        if let object = value as? [String: Any], types.contains("object") {
            for key in schema["required"] as? [String] ?? [] where object[key] == nil { problems.append("\(path).\(key): required, missing") }
            let properties = schema["properties"] as? [String: Any] ?? [:]
            for (key, field) in object {
                if let fieldSchema = properties[key] {
                    problems += validate(field, fieldSchema, at: "\(path).\(key)")
                } else if let additional = schema["additionalProperties"] {
                    problems += validate(field, additional, at: "\(path).\(key)")
                } else {
                    problems.append("\(path).\(key): not documented")
                }
            }
        }
        if let array = value as? [Any], let items = schema["items"] {
            for (index, item) in array.enumerated() { problems += validate(item, items, at: "\(path)[\(index)]") }
        }
        return problems
    }

    static func matches(_ value: Any, _ type: String) -> Bool {
        switch type {
        case "null": return value is NSNull
        case "string": return value is String
        case "boolean": return value is Bool
        case "integer":
            guard !(value is String), let number = value as? NSNumber else { return false }
            return number.doubleValue.rounded() == number.doubleValue
        case "number": return value is NSNumber
        case "object": return value is [String: Any]
        case "array": return value is [Any]
        default: return false
        }
    }
}
