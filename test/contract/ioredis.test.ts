import { IOREDIS_6 } from '../helpers/client-cells.js';
import { clientCellContract } from './client-cell-contract.js';

// ioredis as `npm install ioredis` gives it today (6.x), with its defaults.
clientCellContract(IOREDIS_6);
