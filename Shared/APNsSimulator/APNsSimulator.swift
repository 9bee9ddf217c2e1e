// placeholder: replaced by the APNsSimulator implementation
public enum APNsSimulatorPlaceholder {}
