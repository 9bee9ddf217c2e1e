import FCM
import FCMSimulator
import Foundation
import Testing

@Suite("FCM client against the FCM simulator", .serialized)
struct FCMClientIntegrationTests {
    @Test("a ring message is accepted and recorded: data-only, priority HIGH, TTL to the deadline, collapse key, direct boot")
    func acceptedAndRecorded() async throws {
        try await FCMTestFixture.withClient { simulator, client in
            let message = FCMTestFixture.message(seconds: 20)
            let before = Date()
            let outcome = await client.send(message)
            let after = Date()
            #expect(outcome.disposition == .sent, "\(outcome) \(outcome.error?.message ?? outcome.errorMessage ?? "")")
            #expect(outcome.status == 200)
            #expect(outcome.attempts == 1)
            let recorded = try #require(simulator.messages().first)
            #expect(simulator.messages().count == 1)
            #expect(outcome.messageName == recorded.name)
            #expect(recorded.name.hasPrefix("projects/callpush-test/messages/"))
            #expect(recorded.token == message.token)
            #expect(recorded.data == message.data)
            #expect(!recorded.hasNotification)
            #expect(recorded.httpVersion == "HTTP/2")
            #expect(recorded.account == FCMTestFixture.account.clientEmail)
            let android = try #require(recorded.android)
            #expect(android.priority == "HIGH")
            #expect(android.collapseKey == message.collapseKey)
            #expect(android.directBootOk == true)
            let ttlText = try #require(android.ttl)
            let ttl = try #require(Double(ttlText.dropLast()))
            // The TTL is the time left when the message was built: between what was left before the
            // send and after its answer (FCM's TTL has whole or fractional seconds; allow one for rounding).
            let left = message.deadline.timeIntervalSince(before)
            let leftAfter = message.deadline.timeIntervalSince(after)
            #expect(ttl <= left && ttl >= leftAfter - 1, "ttl \(ttlText) for \(leftAfter)–\(left) s left")
        }
    }

    @Test("the access token is fetched once and reused by many sends")
    func tokenCached() async throws {
        try await FCMTestFixture.withClient { simulator, client in
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<40 { group.addTask { _ = await client.send(FCMTestFixture.message()) } }
            }
            #expect(simulator.messages().count == 40)
            #expect(simulator.stats().tokenRequests == 1)
            #expect(client.tokenRequests == 1)
        }
    }

    @Test("UNREGISTERED ends as tokenDead with FCM's code")
    func unregistered() async throws {
        let dead = "ZGVhZA:APA91bDeadTokenDeadTokenDeadTokenDeadToken"
        try await FCMTestFixture.withClient(faults: .init(tokenOutcomes: [dead: .unregistered])) { simulator, client in
            let outcome = await client.send(FCMTestFixture.message(token: dead))
            #expect(outcome.disposition == .tokenDead)
            #expect(outcome.status == 404)
            #expect(outcome.errorCode == .unregistered)
            #expect(outcome.code == "UNREGISTERED")
            #expect(simulator.messages().isEmpty)
        }
    }

    @Test("SENDER_ID_MISMATCH ends as credentialsInvalid")
    func senderMismatch() async throws {
        let token = "b3RoZXI:APA91bOtherProjectOtherProject"
        try await FCMTestFixture.withClient(faults: .init(tokenOutcomes: [token: .senderIDMismatch])) { _, client in
            let outcome = await client.send(FCMTestFixture.message(token: token))
            #expect(outcome.disposition == .credentialsInvalid)
            #expect(outcome.errorCode == .senderIDMismatch)
        }
    }

    @Test("a 503 burst is reported as retry and a caller's backoff loop gets through within the deadline")
    func unavailableBurst() async throws {
        let burst = FCMErrorInjection(error: .unavailable, count: 3)
        try await FCMTestFixture.withClient(faults: .init(errorRate: burst)) { simulator, client in
            let message = FCMTestFixture.message(seconds: 10)
            var outcomes: [FCMOutcome] = []
            var delay = Duration.milliseconds(20)
            while Date() < message.deadline {
                let outcome = await client.send(message)
            let after = Date()
                outcomes.append(outcome)
                guard outcome.disposition == .retry else { break }
                try await Task.sleep(for: outcome.retryAfter ?? delay)
                delay *= 2
            }
            #expect(outcomes.map(\.disposition) == [.retry, .retry, .retry, .sent])
            #expect(outcomes.prefix(3).allSatisfy { $0.errorCode == .unavailable && $0.status == 503 })
            #expect(simulator.messages().count == 1)
            #expect(Date() < message.deadline)
        }
    }

    @Test("429 QUOTA_EXCEEDED carries Retry-After; waiting that long gets the message through")
    func quotaExceeded() async throws {
        let quota = FCMErrorInjection(error: .quotaExceeded(retryAfterSeconds: 1), count: 1)
        try await FCMTestFixture.withClient(faults: .init(errorRate: quota)) { simulator, client in
            let message = FCMTestFixture.message(seconds: 10)
            let first = await client.send(message)
            #expect(first.disposition == .retry)
            #expect(first.status == 429)
            #expect(first.errorCode == .quotaExceeded)
            #expect(first.retryAfter == .seconds(1))
            try await Task.sleep(for: try #require(first.retryAfter))
            let second = await client.send(message)
            #expect(second.disposition == .sent)
            #expect(simulator.messages().count == 1)
        }
    }

    @Test("after the access tokens are revoked, 50 concurrent sends renew once and all get through")
    func renewalOn401WithoutStorm() async throws {
        try await FCMTestFixture.withClient { simulator, client in
            #expect(await client.send(FCMTestFixture.message()).isSent)
            #expect(simulator.stats().tokenRequests == 1)
            simulator.revokeAccessTokens()
            let outcomes = await withTaskGroup(of: FCMOutcome.self) { group in
                for _ in 0..<50 { group.addTask { await client.send(FCMTestFixture.message()) } }
                return await group.reduce(into: []) { $0.append($1) }
            }
            let failed = outcomes.filter { !$0.isSent }
            #expect(failed.isEmpty, "\(failed.prefix(3))")
            let renewals = simulator.stats().tokenRequests - 1
            #expect(renewals >= 1 && renewals <= 2, "token requests after the 401s: \(renewals)")
            #expect(simulator.stats().rejected["UNAUTHENTICATED", default: 0] >= 1)
            #expect(outcomes.contains { $0.attempts == 2 })
            #expect(simulator.messages().count == 51)
        }
    }

    @Test("a short-lived access token is renewed before it expires: no send is refused")
    func renewedBeforeExpiry() async throws {
        // 10 s tokens: renewed from 7.5 s on, not used after 9 s (counted from the token request); 11 s of
        // sends after the first one (which fetched the token, however long that took) span the renewal and
        // the expiry. The 1 s margin is what a send has to reach the server on a loaded machine.
        try await FCMTestFixture.withClient(faults: .init(accessTokenLifetimeSeconds: 10)) { simulator, client in
            let first = await client.send(FCMTestFixture.message())
            #expect(first.isSent && first.attempts == 1, "\(first)")
            let end = ContinuousClock.now + .seconds(11)
            var sent = 1
            while ContinuousClock.now < end {
                let outcome = await client.send(FCMTestFixture.message())
                #expect(outcome.isSent, "\(outcome)")
                #expect(outcome.attempts == 1, "a send was refused and retried: \(outcome)")
                sent += 1
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(simulator.stats().rejected["UNAUTHENTICATED", default: 0] == 0)
            #expect(simulator.stats().tokenRequests >= 2)
            #expect(simulator.messages().count == sent)
        }
    }

    @Test("the token endpoint failing: the send reports retry (token-unavailable) and a later one gets through")
    func tokenEndpointFailure() async throws {
        let fault = FCMTokenEndpointFault(status: 503, count: 1)
        try await FCMTestFixture.withClient(faults: .init(tokenEndpoint: fault)) { simulator, client in
            let first = await client.send(FCMTestFixture.message())
            #expect(first.disposition == .retry)
            #expect(first.error?.code == .tokenUnavailable)
            #expect(first.error?.wasNotSent == true)
            try await Task.sleep(for: .milliseconds(150))
            let second = await client.send(FCMTestFixture.message())
            #expect(second.isSent, "\(second)")
            #expect(simulator.messages().count == 1)
        }
    }

    @Test("the token endpoint refusing the grant ends as credentialsInvalid")
    func tokenRefused() async throws {
        let fault = FCMTokenEndpointFault(status: 400, error: "invalid_grant")
        try await FCMTestFixture.withClient(faults: .init(tokenEndpoint: fault)) { simulator, client in
            let outcome = await client.send(FCMTestFixture.message())
            #expect(outcome.disposition == .credentialsInvalid)
            #expect(outcome.error?.code == .tokenRefused)
            #expect(simulator.messages().isEmpty)
        }
    }

    @Test("data over 4 KB is refused locally: no token request, nothing sent")
    func dataLimitLocal() async throws {
        try await FCMTestFixture.withClient { simulator, client in
            let outcome = await client.send(FCMTestFixture.message(data: ["blob": String(repeating: "x", count: 4093)]))
            #expect(outcome.disposition == .requestInvalid)
            #expect(outcome.error?.code == .dataTooLarge)
            #expect(outcome.attempts == 0)
            #expect(simulator.stats().tokenRequests == 0)
            #expect(simulator.stats().requestsByVersion.isEmpty)
        }
    }

    @Test("a deadline that passed is not sent")
    func deadlinePassed() async throws {
        try await FCMTestFixture.withClient { simulator, client in
            let outcome = await client.send(FCMTestFixture.message(seconds: -1))
            #expect(outcome.error?.code == .deadlinePassed)
            #expect(outcome.attempts == 0)
            #expect(simulator.stats().requestsByVersion.isEmpty)
            #expect(simulator.messages().isEmpty)
        }
    }

    @Test("a slow FCM: the send ends at its deadline with timeout, not later")
    func slowServer() async throws {
        try await FCMTestFixture.withClient(faults: .init(latency: FCMLatency(minimumMilliseconds: 3000, maximumMilliseconds: 3000))) { _, client in
            // The access token first, with time to spare: on a loaded machine its fetch alone can take
            // longer than the 500 ms below (that case is `token-unavailable`, tested above).
            // Its own request timeout covers the simulator's 3 s latency with room for a slow handshake.
            var first = FCMTestFixture.message()
            first.timeout = .seconds(20)
            let warmUp = await client.send(first)
            #expect(warmUp.isSent, "\(warmUp)")
            var message = FCMTestFixture.message()
            message.timeout = .milliseconds(500)
            let outcome = await client.send(message)
            #expect(outcome.error?.code == .timeout)
            #expect(outcome.disposition == .retry)
            #expect(outcome.latency < .milliseconds(2_900), "before the server's answer, 3 s later")
        }
    }

    @Test("a service account's description and errors never show its key")
    func keyNeverShown() throws {
        let json = try FCMTestFixture.account.json(tokenURI: "https://127.0.0.1:1/token")
        let account = try FCMServiceAccount(json: Array(json.utf8))
        #expect(!"\(account)".contains("PRIVATE"))
        #expect("\(account)".contains(FCMTestFixture.account.clientEmail))
        #expect(throws: FCMCredentialError.self) { try FCMServiceAccount(json: Array(#"{"project_id":"p","client_email":"a@b","private_key":"nope"}"#.utf8)) }
        #expect(throws: FCMCredentialError.self) {
            try FCMServiceAccount(json: Array(json.replacingOccurrences(of: "https://127.0.0.1:1/token", with: "http://x/token").utf8))
        }
    }
}
