export declare const root: string;
export declare const bundlePath: string;
export declare function buildWorker(target?: { entry?: string; outfile?: string }): Promise<string>;
export declare const WORKERD_BUNDLE: import("esbuild").BuildOptions;
export declare function buildSdkModule(): void;
