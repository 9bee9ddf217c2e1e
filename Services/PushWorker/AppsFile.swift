import CallpushCore
import APNs
import Foundation

/// The apps file (`CALLPUSH_APPS_FILE`): app name → bundle id and APNs credentials.
///
/// ```json
/// {
///   "rider":  {"bundleId": "com.example.rider", "auth": "token",
///              "keyFile": "/run/secrets/AuthKey_ABC123DEFG.p8", "keyId": "ABC123DEFG", "teamId": "DEF123GHIJ"},
///   "driver": {"bundleId": "com.example.driver", "auth": "certificate",
///              "p12File": "/run/secrets/driver.p12", "passwordFile": "/run/secrets/driver-p12-password"},
///   "clinic": {"bundleId": "com.example.clinic", "auth": "certificate",
///              "certificateFile": "/run/secrets/clinic.pem", "privateKeyFile": "/run/secrets/clinic-key.pem"}
/// }
/// ```
/// Keys and passwords are read from files, never written in the apps file itself.
enum AppsFile {
    struct Entry: Decodable {
        var bundleId: String
        var auth: String
        var keyFile: String?
        var keyId: String?
        var teamId: String?
        var p12File: String?
        var passwordFile: String?
        var certificateFile: String?
        var privateKeyFile: String?
    }

    static func load(path: String, reader: EnvironmentReader) throws(ConfigurationError) -> [APNSAppID: APNSApp] {
        let text = try reader.file(path, key: "CALLPUSH_APPS_FILE")
        let entries: [String: Entry]
        do {
            entries = try JSONDecoder().decode([String: Entry].self, from: Data(text.utf8))
        } catch {
            throw ConfigurationError("CALLPUSH_APPS_FILE", "not a JSON object of apps: \(error)")
        }
        guard !entries.isEmpty else { throw ConfigurationError("CALLPUSH_APPS_FILE", "no apps configured") }
        var apps: [APNSAppID: APNSApp] = [:]
        for (name, entry) in entries.sorted(by: { $0.key < $1.key }) {
            let key = "CALLPUSH_APPS_FILE \(name)"
            guard name.utf8.count <= 64, !name.isEmpty,
                  name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
                throw ConfigurationError(key, "app names are 1–64 of letters, digits, '.', '-', '_'")
            }
            func field(_ value: String?, _ field: String) throws(ConfigurationError) -> String {
                guard let value, !value.isEmpty else { throw ConfigurationError("\(key).\(field)", "required for auth \"\(entry.auth)\"") }
                return value
            }
            for (field, path) in [("keyFile", entry.keyFile), ("p12File", entry.p12File), ("passwordFile", entry.passwordFile),
                                  ("privateKeyFile", entry.privateKeyFile)] {
                if let path { reader.auditSecretFile(path, key: "\(key).\(field)") }
            }
            let credentials: APNSCredentials
            do {
                switch entry.auth {
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
            apps[APNSAppID(name)] = APNSApp(bundleID: entry.bundleId, credentials: credentials)
        }
        return apps
    }
}
