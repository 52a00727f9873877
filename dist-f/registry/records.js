export {};
//# sourceMappingURL=records.js.map