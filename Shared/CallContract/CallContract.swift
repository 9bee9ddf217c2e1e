// placeholder: replaced by the CallContract implementation
public enum CallContractPlaceholder {}
