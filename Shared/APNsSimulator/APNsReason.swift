/// An APNs error answer: `:status` and the `reason` of the JSON body.
struct APNsReason: Error, Sendable, Hashable {
    var status: Int
    var reason: String

    static let badDeviceToken = APNsReason(status: 400, reason: "BadDeviceToken")
    static let missingDeviceToken = APNsReason(status: 400, reason: "MissingDeviceToken")
    static let badCollapseId = APNsReason(status: 400, reason: "BadCollapseId")
    static let badExpirationDate = APNsReason(status: 400, reason: "BadExpirationDate")
    static let badMessageId = APNsReason(status: 400, reason: "BadMessageId")
    static let badPriority = APNsReason(status: 400, reason: "BadPriority")
    static let badTopic = APNsReason(status: 400, reason: "BadTopic")
    static let duplicateHeaders = APNsReason(status: 400, reason: "DuplicateHeaders")
    static let invalidPushType = APNsReason(status: 400, reason: "InvalidPushType")
    static let missingTopic = APNsReason(status: 400, reason: "MissingTopic")
    static let payloadEmpty = APNsReason(status: 400, reason: "PayloadEmpty")
    static let expiredProviderToken = APNsReason(status: 403, reason: "ExpiredProviderToken")
    static let invalidProviderToken = APNsReason(status: 403, reason: "InvalidProviderToken")
    static let missingProviderToken = APNsReason(status: 403, reason: "MissingProviderToken")
    static let unrelatedKeyIdInToken = APNsReason(status: 403, reason: "UnrelatedKeyIdInToken")
    static let badPath = APNsReason(status: 404, reason: "BadPath")
    static let methodNotAllowed = APNsReason(status: 405, reason: "MethodNotAllowed")
    static let payloadTooLarge = APNsReason(status: 413, reason: "PayloadTooLarge")
    static let tooManyProviderTokenUpdates = APNsReason(status: 429, reason: "TooManyProviderTokenUpdates")
    static let internalServerError = APNsReason(status: 500, reason: "InternalServerError")
    static let shutdown = APNsReason(status: 503, reason: "Shutdown")
}
