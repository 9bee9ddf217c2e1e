import ArgumentParser
import CallContract
import Foundation
import NIOHTTP1

/// `callpush send`: rings one device through dispatch's HTTP API (smoke tests).
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Ring one device through dispatch (POST /v1/calls) and print the answer.",
        discussion: """
            The API key is read from --api-key-file, else CALLPUSH_API_KEY_FILE, else CALLPUSH_API_KEY \
            (never from the command line). With --wait, follows the call's events \
            (GET /v1/calls/{id}/events) until every delivery is terminal, then prints the call \
            (GET /v1/calls/{id}); the exit status is 0 only if every delivery ended sent or reported.
            """
    )

    @Option(help: ArgumentHelp("dispatch's base URL, e.g. http://127.0.0.1:8080.", valueName: "url"))
    var url: String

    @Option(help: ArgumentHelp("File holding the API key (env CALLPUSH_API_KEY_FILE or CALLPUSH_API_KEY).", valueName: "path"))
    var apiKeyFile: String?

    @Option(help: "The app (an entry of the worker's apps file).")
    var app: String

    @Option(help: "The device's platform: ios (an APNs VoIP token) or android (an FCM registration token).")
    var platform = "ios"

    @Option(help: "The device's push token: hex for ios, the FCM registration token (verbatim) for android.")
    var token: String

    @Option(help: "APNs environment of the token: production or sandbox (ios only; android devices have none).")
    var environment = "production"

    @Option(help: "The backend's id for the device (echoed in statuses).")
    var deviceId: String?

    @Option(help: "Caller handle shown by CallKit.")
    var handle = "callpush-send"

    @Option(help: "Caller display name.")
    var displayName: String?

    @Flag(help: "A video call.")
    var video = false

    @Option(help: "Seconds the call may ring (1…120).")
    var ringTimeout = 30

    @Option(help: "Use this call id (a UUID) instead of a new one.")
    var callId: String?

    @Flag(help: "Follow the call until every delivery is terminal.")
    var wait = false

    @Option(help: "Bound of each HTTP request.")
    var timeout = DurationArgument(.seconds(10))

    @Option(help: ArgumentHelp("Extra CA certificate (PEM) to trust for an https URL.", valueName: "path"))
    var caFile: String?

    func validate() throws {
        guard HTTPExchange.validate(url) != nil else { throw ValidationError("--url must be an http:// or https:// URL with a host, got '\(url.prefix(80))'") }
        guard let devicePlatform = DevicePlatform(rawValue: platform) else { throw ValidationError("--platform must be ios or android") }
        guard APNSEnvironment(rawValue: environment) != nil else { throw ValidationError("--environment must be production or sandbox") }
        if let problem = Device.tokenProblem(token, platform: devicePlatform) { throw ValidationError("--token: \(problem)") }
        guard (1...120).contains(ringTimeout) else { throw ValidationError("--ring-timeout must be between 1 and 120 seconds") }
        if let callId, CallID.normalize(callId) == nil { throw ValidationError("--call-id must be a UUID") }
        guard !app.isEmpty, app.utf8.count <= RingRequest.Limits.appNameBytes else { throw ValidationError("--app must be 1 to 64 bytes") }
        guard timeout.duration >= .milliseconds(100), timeout.duration <= .seconds(300) else {
            throw ValidationError("--timeout must be between 100ms and 5m")
        }
    }

    func run() async throws {
        try await CommandRunner.run("send") {
            try await execute(environment: ProcessInfo.processInfo.environment, output: .standard)
        }
    }

    /// The JSON body of POST /v1/calls.
    func requestBody(callId: String) throws -> [UInt8] {
        // An Android device has no environment, and its FCM token is case-sensitive.
        var device: [String: Any] = platform == DevicePlatform.android.rawValue
            ? ["platform": platform, "token": token]
            : ["token": token.lowercased(), "environment": environment]
        if let deviceId { device["id"] = deviceId }
        var caller: [String: Any] = ["handle": handle]
        if let displayName { caller["displayName"] = displayName }
        let body: [String: Any] = ["callId": callId, "app": app, "devices": [device], "caller": caller,
                                   "hasVideo": video, "ringTimeoutSeconds": ringTimeout]
        return Array(try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys]))
    }

    /// The API key from the file or environment, trimmed.
    func apiKey(environment env: [String: String]) throws(CLIError) -> String {
        let path = apiKeyFile ?? env["CALLPUSH_API_KEY_FILE"]
        let key: String
        if let path {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw CLIError.usage("cannot read the API key file \(path)")
            }
            key = String(decoding: data, as: UTF8.self)
        } else if let value = env["CALLPUSH_API_KEY"] {
            key = value
        } else {
            throw CLIError.usage("no API key: use --api-key-file PATH or set CALLPUSH_API_KEY_FILE / CALLPUSH_API_KEY")
        }
        let trimmed = key.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw CLIError.usage("the API key is empty") }
        return trimmed
    }

    /// Sends the ring (and follows it with --wait); returns the exit status.
    func execute(environment env: [String: String], output: CommandOutput) async throws -> Int32 {
        guard let base = HTTPExchange.validate(url) else { throw CLIError.usage("--url is not an http(s) URL") }
        let key = try apiKey(environment: env)
        let http = HTTPExchange(baseURL: base, timeout: timeout.duration, caFile: caFile)
        let id = callId.flatMap(CallID.normalize) ?? CallID.make()
        let auth = [("Authorization", "Bearer \(key)"), ("Accept", "application/json")]
        let answer = try await http.send(.POST, "/v1/calls", headers: auth + [("Content-Type", "application/json")],
                                         body: try requestBody(callId: id))
        guard answer.status == 202 || answer.status == 200 else { throw Self.problem(answer, "POST /v1/calls") }
        output.line(answer.bodyText)
        guard wait else { return CLIExit.success }

        // Server-sent events until `event: end` (or the ring timeout plus a margin).
        let events = SSELineSplitter()
        let streamBound = Duration.seconds(ringTimeout + 30)
        let stream = try await http.send(.GET, "/v1/calls/\(id)/events", headers: [("Authorization", "Bearer \(key)"), ("Accept", "text/event-stream")],
                                         timeout: streamBound) { chunk in
            for event in events.feed(chunk) {
                if event.name == "end" { return false }
                if event.name == "status" { output.line(event.data) }
            }
            return true
        }
        guard stream.status == 200 else { throw Self.problem(stream, "GET /v1/calls/\(id)/events") }
        let final = try await http.send(.GET, "/v1/calls/\(id)", headers: auth)
        guard final.status == 200 else { throw Self.problem(final, "GET /v1/calls/\(id)") }
        output.line(final.bodyText)
        let states = Self.deliveryStates(final.body)
        guard !states.isEmpty, states.allSatisfy({ $0 == "sent" || $0 == "reported" }) else {
            throw CLIError("call-not-delivered", "call \(id) ended: \(states.isEmpty ? "no deliveries" : states.joined(separator: ", "))")
        }
        return CLIExit.success
    }

    static func deliveryStates(_ body: [UInt8]) -> [String] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
              let deliveries = object["deliveries"] as? [[String: Any]] else { return [] }
        return deliveries.compactMap { $0["state"] as? String }
    }

    /// One line from an RFC 9457 problem (or the raw status).
    static func problem(_ answer: HTTPAnswer, _ what: String) -> CLIError {
        var text = "\(what): dispatch answered \(answer.status)"
        if let object = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any] {
            let parts = [object["title"], object["detail"]].compactMap { $0 as? String }
            if !parts.isEmpty { text += " " + parts.joined(separator: ": ") }
            if let field = object["field"] as? String { text += " (field \(field))" }
        }
        return CLIError("http-\(answer.status)", text)
    }
}
