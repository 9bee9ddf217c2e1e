import CallpushCore
import APNs
import FCM
import Foundation

/// The apps file (`CALLPUSH_APPS_FILE`): app name → bundle id and APNs credentials (iPhones),
/// and/or its FCM service account (Android phones).
///
/// ```json
/// {
///   "rider":  {"bundleId": "com.example.rider", "auth": "token",
///              "keyFile": "/run/secrets/AuthKey_ABC123DEFG.p8", "keyId": "ABC123DEFG", "teamId": "DEF123GHIJ"},
///   "driver": {"bundleId": "com.example.driver", "auth": "certificate",
///              "p12File": "/run/secrets/driver.p12", "passwordFile": "/run/secrets/driver-p12-password"},
///   "clinic": {"bundleId": "com.example.clinic", "auth": "certificate",
///              "certificateFile": "/run/secrets/clinic.pem", "privateKeyFile": "/run/secrets/clinic-key.pem",
///              "fcm": {"serviceAccountFile": "/run/secrets/clinic-firebase.json"}},
///   "courier": {"fcm": {"serviceAccountFile": "/run/secrets/courier-firebase.json"}}
/// }
/// ```
/// An app has APNs credentials (`bundleId` and `auth`), an FCM service account (`fcm`), or both.
/// Keys, passwords and service accounts are read from files, never written in the apps file itself,
/// and never logged (a bad file is named, its content is not).
enum AppsFile {
    struct FCMEntry: Decodable {
        /// The Firebase service-account JSON (project id, client email, private key, token URI).
        var serviceAccountFile: String
    }

    struct Entry: Decodable {
        var bundleId: String?
        var auth: String?
        var fcm: FCMEntry?
        var keyFile: String?
        var keyId: String?
        var teamId: String?
        var p12File: String?
        var passwordFile: String?
        var certificateFile: String?
        var privateKeyFile: String?
    }

    /// The apps of the file: those with APNs credentials, and those with an FCM service account.
    struct Apps {
        var apns: [APNSAppID: APNSApp] = [:]
        var fcm: [FCMAppID: FCMApp] = [:]
    }

    static func load(path: String, reader: EnvironmentReader) throws(ConfigurationError) -> Apps {
        let text = try reader.file(path, key: "CALLPUSH_APPS_FILE")
        let entries: [String: Entry]
        do {
            entries = try JSONDecoder().decode([String: Entry].self, from: Data(text.utf8))
        } catch {
            throw ConfigurationError("CALLPUSH_APPS_FILE", "not a JSON object of apps: \(error)")
        }
        guard !entries.isEmpty else { throw ConfigurationError("CALLPUSH_APPS_FILE", "no apps configured") }
        var apps = Apps()
        for (name, entry) in entries.sorted(by: { $0.key < $1.key }) {
            let key = "CALLPUSH_APPS_FILE \(name)"
            guard name.utf8.count <= 64, !name.isEmpty,
                  name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
                throw ConfigurationError(key, "app names are 1–64 of letters, digits, '.', '-', '_'")
            }
            guard entry.auth != nil || entry.bundleId != nil || entry.fcm != nil else {
                throw ConfigurationError(key, "needs APNs credentials (bundleId and auth), an fcm service account, or both")
            }
            if let fcm = entry.fcm {
                apps.fcm[FCMAppID(name)] = try fcmApp(fcm, key: "\(key).fcm", reader: reader)
            }
            guard entry.auth != nil || entry.bundleId != nil else { continue }
            apps.apns[APNSAppID(name)] = try apnsApp(entry, key: key, reader: reader)
        }
        return apps
    }

    private static func fcmApp(_ entry: FCMEntry, key: String, reader: EnvironmentReader) throws(ConfigurationError) -> FCMApp {
        let field = "\(key).serviceAccountFile"
        guard !entry.serviceAccountFile.isEmpty else { throw ConfigurationError(field, "must name a file") }
        reader.auditSecretFile(entry.serviceAccountFile, key: field)
        let json = try reader.file(entry.serviceAccountFile, key: field)
        do throws(FCMCredentialError) {
            // The error names what is wrong (a missing field, a key that is not RSA), never the key itself.
            return FCMApp(serviceAccount: try FCMServiceAccount(json: Array(json.utf8)))
        } catch {
            throw ConfigurationError(field, "not a usable service account: \(error.message)")
        }
    }

    private static func apnsApp(_ entry: Entry, key: String, reader: EnvironmentReader) throws(ConfigurationError) -> APNSApp {
        guard let bundleId = entry.bundleId, !bundleId.isEmpty else { throw ConfigurationError("\(key).bundleId", "required with auth") }
        guard APNSApp.isValidBundleID(bundleId) else {
            throw ConfigurationError("\(key).bundleId", "must be at most 155 of A–Z a–z 0–9 . - (Apple's bundle id characters)")
        }
        guard let auth = entry.auth else { throw ConfigurationError("\(key).auth", "required with bundleId: \"token\" or \"certificate\"") }
        func field(_ value: String?, _ field: String) throws(ConfigurationError) -> String {
            guard let value, !value.isEmpty else { throw ConfigurationError("\(key).\(field)", "required for auth \"\(auth)\"") }
            return value
        }
        for (field, path) in [("keyFile", entry.keyFile), ("p12File", entry.p12File), ("passwordFile", entry.passwordFile),
                              ("privateKeyFile", entry.privateKeyFile)] {
            if let path { reader.auditSecretFile(path, key: "\(key).\(field)") }
        }
        let credentials: APNSCredentials
        do {
            switch auth {
            case "token":
                credentials = .token(try APNSSigningKey(p8File: try field(entry.keyFile, "keyFile"),
                                                        keyID: try field(entry.keyId, "keyId"), teamID: try field(entry.teamId, "teamId")))
            case "certificate" where entry.p12File != nil:
                let password = try reader.file(try field(entry.passwordFile, "passwordFile"), key: "\(key).passwordFile")
                credentials = .certificate(try .pkcs12(path: try field(entry.p12File, "p12File"), password: password))
            case "certificate":
                credentials = .certificate(try .pem(certificatePath: try field(entry.certificateFile, "certificateFile"),
                                                    privateKeyPath: try field(entry.privateKeyFile, "privateKeyFile")))
            default:
                throw ConfigurationError("\(key).auth", "expected \"token\" or \"certificate\"")
            }
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError(key, "\(error)")
        }
        return APNSApp(bundleID: bundleId, credentials: credentials)
    }
}
