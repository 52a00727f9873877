export {};
//# sourceMappingURL=registry-store.js.map